"""Word lists for the synthetic narrative: names, places, organisations, objects and phrases.

Lists are plain tuples so their content can be hashed into the source's sha256. The haystack never
contains digits other than four-digit years, so a numeric needle value cannot collide with it.
"""

from __future__ import annotations


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(" ".join(p.split()) for p in text.split("|") if p.strip())


FEMALE_NAMES = _words("""
Abigail Ada Adaeze Agnes Aiko Alba Alice Alma Amara Amelia Ana Anika Anneliese Antonia Astrid Aurora
Ayesha Beatrice Bianca Bridget Camille Carmen Cecilia Celeste Chiara Clara Constance Cordelia Dagny Dalia
Daphne Delphine Dolores Dorothea Edith Eleanor Elif Eliza Elsa Elspeth Emilia Esme Esther Eudora Evangeline
Fatima Felicity Fenella Fiona Flora Florence Freya Gabriela Genevieve Georgina Greta Gwen Hana Harriet
Hattie Hazel Helena Hester Hilde Honora Ida Ilse Imogen Ines Ingrid Iris Isadora Isolde Ivy Jadwiga Jane
Janet Jessamy Johanna Josephine Judith Julia Juno Kaja Karin Katarina Keziah Kirsten Laila Lavinia Leah
Leonora Liesel Lillian Linnea Lorna Lucia Lucinda Lydia Mabel Madeleine Mae Magda Maren Margaret Marisol
Marta Matilda Maud Meera Mei Mercy Mina Minerva Miriam Moira Nadia Naledi Nell Nerissa Niamh Nina Noor
Octavia Odile Olga Olive Ophelia Orla Paloma Pauline Penelope Petra Philippa Phoebe Priya Prudence Rafaela
Ragna Rania Rebecca Renata Rhea Rosalind Rosamund Rowena Ruth Sabine Saoirse Selma Seraphina Signe Silvia
Sofia Solveig Susannah Sybil Tabitha Tamsin Thea Theodora Tova Ursula Valentina Vera Veronika Vesna
Violet Vivienne Wilhelmina Winifred Xenia Yara Yasmin Yvette Zainab Zara Zelda Zofia Zora
""")

MALE_NAMES = _words("""
Abel Adrian Alaric Albert Alexei Alfred Alistair Ambrose Amir Anders Angus Anselm Anton Arjun Arthur
Augustin Barnaby Bartholomew Basil Benedict Bertram Bjorn Boris Caspar Cedric Cillian Clement Conrad
Cornelius Cosmo Crispin Cyril Dario Declan Desmond Dimitri Dorian Edmund Edwin Elias Emeka Emil Emrys Enzo
Erasmus Ernest Esteban Evander Ezra Fabian Felix Ferdinand Finnian Florian Francis Frederick Gareth Gideon
Gilbert Godfrey Gregor Gustav Hamish Hannes Harold Hector Henrik Hiroshi Horace Hugo Ignatius Isaac Ivan
Jakob Jasper Joachim Jonas Joseph Julian Kasimir Kazuo Kenji Kofi Konstantin Lars Laurence Leander Leopold
Linus Lionel Lorcan Lucian Ludovic Magnus Malachy Marek Marius Matthias Maxim Milo Mordecai Nathaniel
Nikolai Niklas Oberon Octavius Olaf Oliver Orson Osric Oswin Otto Pascal Percival Peregrine Piotr Quentin
Rafael Raghav Ralph Randolph Reuben Rhys Roderick Roland Rupert Samir Sebastian Severin Silas Soren
Stellan Sven Tadeusz Tariq Theodore Thaddeus Tobias Tomas Ulrich Valentin Vikram Wendell Wilfred Xavier
Yusuf Zachary Zoltan Callum Dafydd Emanuel Fergus Gottfried Ishaan Jonah Kwame Lennart Mateo Nico Ossian
""")

SURNAMES = _words("""
Abernathy Achterberg Adeyemi Ahlgren Albescu Alcott Amundsen Andrzejewski Arbuthnot Ashdown Aveling
Bairstow Balogun Barraclough Bascombe Beauchamp Bellweather Blackwood Blomqvist Bonnington Bradwell
Brannigan Brightwater Broadhurst Calloway Carmichael Castellano Chadwick Chakraborty Chatterton Clearwater
Cobbold Coldwell Copperfield Cortazar Crabtree Cresswell Dabrowski Dalgleish Darrowby Delacroix Denholm
Desrosiers Drummond Dunmore Eberhardt Eckersley Edgecombe Ellingham Enfield Esterhazy Fairbairn Falconer
Farnsworth Featherstone Fennimore Fitzgerald Fleetwood Forsythe Fothergill Gallagher Garroway Gilchrist
Goldsworthy Greaves Grimshaw Gunnarsson Haddington Halvorsen Hargreaves Harrowgate Hathaway Hazelwood
Hedley Hennessey Hollingsworth Holmberg Honeywell Hornby Huxtable Ishikawa Iwasaki Jablonski Jardine
Jefferies Kavanagh Kellerman Kennaway Kettleby Kowalczyk Kristiansen Lachance Lambourne Langridge
Larkspur Latimer Leverett Lindqvist Lockhart Lovegrove Lundgren MacAllister Machado Mackenzie Maitland
Malinowski Mansfield Marchbanks Markham Mayhew Merriweather Micklethwaite Montague Morland Mortimer
Mukherjee Nakamura Nettleship Nightingale Norcross Northcott Nwachukwu Oakley Obradovic Okafor Oldroyd
Olsen Onyango Ormerod Osei Pemberton Pennington Petrakis Pettigrew Pickering Polanski Prendergast
Quarrington Quilliam Radcliffe Ramasamy Ravensworth Redgrave Renshaw Ridgeway Rochester Rosenthal
Rowntree Rutherford Sandoval Saxby Scarborough Selwyn Shackleton Sheringham Silverthorne Sinclair
Sorensen Stallworth Standish Stenhouse Strickland Summerhayes Sutcliffe Swinburne Takahashi Tallis
Tanaka Thistlewood Thornbury Threlfall Tindall Trelawney Tremayne Umberto Underhill Valdez Vanstone
Varga Villeneuve Wainwright Wakefield Walmsley Warburton Weatherby Wetherell Whitcombe Wickham
Wilberforce Winterbottom Woolcott Wray Yardley Yeoman Yoshida Zielinski Zimmerman Achebe Bergstrom
Castillo Dunleavy Eriksen Fontaine Gorecki Haverford Ingleby Jovanovic Kilbride Lindley Moreau Novak
Okonkwo Petersen Quigley Rasmussen Szabo Trevelyan Urquhart Vasquez Whitlock Yilmaz
""")

TITLES_F = ("Mrs", "Miss", "Ms", "Doctor", "Professor", "Captain")
TITLES_M = ("Mr", "Mr", "Mr", "Doctor", "Professor", "Captain")

TOWN_HEADS = _words("""
Ash Bel Bram Brig Cal Carn Dun Elm Fen Gar Glen Hal Har Hol Kel Kirk Lang Lin Lyn Mal Mar Mor Nor Oak Pen
Quen Ral Rav Ros Sal Scar Shel Stan Thorn Tre Ul Wal Wen Whit Wyn
""")

TOWN_TAILS = _words("""
ford wick by thorpe mere ton ham stead bury combe field worth haven dale holm leigh minster mouth ness
shaw stow well wood brook cliffe
""")

RIVERS = _words("""
Avel Brenn Calder Dovey Esk Fenner Gowan Hale Isbourne Kennet Lune Medway Nidd Orrin Penk Rother Severn
Swale Tamar Teign Ure Wharfe Wyre Yare
""")

STREET_KINDS = _words("Street Lane Road Row Terrace Hill Walk Close Square Parade Gardens Crescent")
TREES = _words("oak ash elm birch willow hawthorn chestnut linden alder rowan cedar beech poplar yew")

ORG_KINDS = _phrases("""
Historical Society | Rowing Club | Choral Society | Savings Bank | Shipping Company | Glassworks |
Printing House | Botanical Garden | Cooperative | Flour Mill | Brewery | Observatory | Lending Library |
Clock Company | Ferry Company | Pottery | Museum | Conservatory of Music | Cottage Hospital | Tramway Company |
Weaving Mill | Fire Brigade | Chess Club | Orchestra | Seed Company | Chamber of Commerce | Gazette |
Theatre Company | Cycling Club | Beekeepers' Association | Lifeboat Station | Rope Works | Tannery |
Amateur Dramatic Society | Grammar School | Football Club | Fishing Cooperative | Map Society
""")

OCCUPATIONS = _phrases("""
clockmaker | schoolteacher | ferry pilot | bookbinder | surveyor | midwife | lighthouse keeper | baker |
carpenter | solicitor | pharmacist | stonemason | cartographer | harbour master | translator | engineer |
seamstress | veterinarian | librarian | glassblower | organist | journalist | beekeeper | archivist |
shipwright | photographer | botanist | blacksmith | nurse | accountant | fishmonger | tailor | gardener |
potter | signalman | postmistress | printer | architect | chemist | violin maker | innkeeper | farmer |
watchman | painter | dentist | weaver | locksmith | bus driver | geologist | mechanic
""")

TRAITS = _words("""
patient restless careful cheerful stubborn quiet meticulous generous anxious proud gentle blunt curious
cautious warm reserved impatient thoughtful practical stern kindly nervous witty solemn tireless
absent-minded sharp-eyed soft-spoken quick-tempered even-handed good-natured
""")

ADJECTIVES = _words("""
old narrow crooked faded heavy bright quiet dusty polished cracked worn tidy crowded empty cold warm
damp sunlit shadowed long low broad steep cluttered silent draughty freshly-painted weathered elegant
plain modest enormous tiny ancient familiar strange gleaming battered sturdy fragile crumbling
""")

COLORS = _words("grey green blue ochre crimson white black amber slate russet cream silver copper rose")
MATERIALS = _words("oak pine brass iron copper stone brick slate glass linen wool leather tin walnut")

OBJECTS = _phrases("""
key | lantern | ledger | letter | map | compass | kettle | violin | umbrella | basket | photograph |
pocket watch | notebook | telescope | teapot | shawl | parcel | candlestick | clock | typewriter |
bicycle | suitcase | fishing rod | paintbrush | wheelbarrow | chess set | sewing box | telegram |
bundle of receipts | jar of honey | loaf of bread | pair of gloves | ink bottle | music box | tin whistle |
walking stick | hatbox | rolled chart | wooden crate | box of seeds | gramophone
""")

VENUES = _phrases("""
the market hall | the old boathouse | the railway station | the reading room | the harbour wall |
the bakery on the corner | the churchyard | the post office | the village green | the glasshouse |
the back kitchen | the town hall | the printing works | the bandstand | the covered bridge |
the schoolroom | the orchard | the ferry landing | the public library | the tea room | the dye works |
the allotments | the signal box | the museum annexe | the corn exchange | the chapel | the bus depot |
the boatyard | the fish market | the lecture theatre | the timber yard | the goods yard |
the hotel lobby | the surgery | the water mill | the lighthouse | the dance hall | the boarding house
""")

FEATURES = _phrases("""
the window | the door | the stove | the long table | the stairs | the counter | the fireplace | the shelves |
the bench by the wall | the notice board | the far corner | the doorway | the desk | the railing |
the piano | the cupboard | the stone steps | the gate
""")

EVENTS = _phrases("""
the harvest fair | the spring regatta | the winter ball | the annual audit | the flower show |
the midsummer concert | the lantern procession | the board meeting | the cattle market | the chess
tournament | the autumn exhibition | the charity auction | the school prize-giving | the bridge
reopening | the election count | the river clean-up | the cycling race | the jumble sale |
the lifeboat appeal | the choir competition | the anniversary dinner | the first night of the play
""")

WEATHER = _phrases("""
a thin rain was falling | the wind had turned to the east | the sky was clear and pale | fog lay over the
rooftops | it had been snowing since dawn | the afternoon was heavy and still | a gale was rattling the
shutters | the first frost had whitened the fields | a warm drizzle hung in the air | low clouds moved
quickly inland | the sun had come out at last | sleet was blowing along the street
""")

TIMES = _phrases("""
early that morning | just after noon | late in the afternoon | that evening | shortly before midnight |
at first light | on the following day | a week later | by the end of the month | the next morning |
some hours later | in the middle of the night | at dusk | before breakfast | after the last train had gone
""")

SEASONS = _words("spring summer autumn winter")
MONTHS = _words("January February March April May June July August September October November December")
WEEKDAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
NUMBER_WORDS = _words("two three four five six seven eight nine ten eleven twelve twenty forty")
AGES = _phrases(
    "nineteen | twenty-three | thirty | thirty-four | forty-one | forty-seven | fifty-two | sixty | seventy-three"
)

FOODS = _phrases("""
bread and cheese | apple cake | fish soup | boiled potatoes | cold ham | ginger biscuits | lentil stew |
plum tart | roast chestnuts | oat porridge | smoked herring | a pork pie | buttered toast | onion pie
""")
DRINKS = _phrases("strong tea | black coffee | cider | hot cocoa | barley water | elderflower cordial | warm milk")
EMOTIONS = _words("relief unease amusement irritation gratitude suspicion pride regret curiosity affection")
ANIMALS = _phrases("a black cat | a pair of gulls | an old dog | a robin | a carthorse | a flock of starlings")
SOUNDS = _phrases("""
the church bell | a distant train | rain on the roof | the ticking of a clock | gulls calling | a door banging
somewhere upstairs | the hiss of the kettle | a brass band rehearsing | wheels on the cobbles
""")
SMELLS = _phrases("wet wool | coal smoke | fresh bread | lamp oil | salt and seaweed | cut grass | old paper | varnish")

MOVES = _words("walked hurried strolled wandered stepped crossed marched drifted limped strode")
SAYS = _words("said replied answered murmured remarked added observed admitted insisted explained")
ASKS = _words("asked wondered inquired demanded")
MANNERS = _phrases("""
without looking up | after a long pause | with a small smile | almost inaudibly | quite calmly |
in a low voice | a little too quickly | with some reluctance | as if it hardly mattered | firmly
""")

LINES = _phrases("""
I never thought the {obj} would survive the winter | We ought to tell {Cf} before {E} |
{O} has not paid anyone since {month} | It was exactly where you left it | Nobody in {T} remembers
it that way | You could at least have written | I have walked past that house every day for years |
The train was late again, of course | Leave the {obj} on the table and go home |
My mother used to say the {river} floods every seventh year | There is no need to shout |
I suppose it depends on the weather | That is not what the minutes say | We will need at least {n} more chairs |
The whole street could hear them arguing | Half of {T} will be there, and the other half will wish they were |
I found it in the {room} behind a loose board | You are later than you promised | It smells of {smell} in here |
The roof will not last another {season} | They have changed the timetable again | I kept the receipt, somewhere |
She said it was the best {food} she had eaten in years | {O} will not like it | I have no intention of going back |
Mind the step, it is loose | We used to swim in the {river} when we were children |
You should have seen the crowd at {E} |
Put it down to experience | I have been meaning to ask you about the {obj}
""")

QUESTIONS = _phrases("""
Have you seen the {obj} anywhere | Who told you about {E} | Is it true that {O} is closing |
Why would anyone keep {a_obj} in the {room} | When did you last see {Cf} | Do you think it will rain |
What did the letter say | Are you coming to {V} tomorrow | How long have you lived in {T} |
Did anyone think to lock the door | Where were you on {day} night | Would you like some {drink} |
Can you mend it by {day} | What became of the old {obj} | Was it really as bad as they say
""")

ROOMS = _phrases("attic | cellar | parlour | scullery | back bedroom | study | pantry | hallway | workshop | loft")
