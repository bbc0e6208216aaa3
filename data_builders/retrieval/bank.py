"""The retrieval task's fact bank, written for this project: invented subjects, one-sentence facts, three queries.

Each topic kind (a bell, a lighthouse, ...) has three fact templates about a subject named by an invented word
({N}) and, per fact, a medium query (4-6 words, names the subject) and a long query (7+ words, a paraphrase that
names neither the subject nor, mostly, the fact's words). The short query (1-3 words) is the subject's name and
asks for every fact planted about it. Values ({year}, {year2}, {num}) are drawn per document.
Every fact is one sentence without inner full stops, so the sentence chunker never splits it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """One fact template and the two queries that ask for it (medium names the subject, long paraphrases)."""

    sentence: str
    medium: str
    long: str
    num: tuple[int, int] = (2, 9)  # range of {num} in `sentence`


@dataclass(frozen=True)
class TopicKind:
    """A kind of subject: its noun, short-query forms ({N} is the name) and three facts."""

    noun: str
    short: tuple[str, ...]
    facts: tuple[Fact, Fact, Fact]


BANK: tuple[TopicKind, ...] = (
    TopicKind(
        "bell",
        ("{N}", "{N} bell", "the {N} bell"),
        (
            Fact(
                "The great bell of {N} was cast in {year} from the bronze of old ship cannons.",
                "when was the {N} bell cast",
                "which town's chime was made by melting down naval guns",
            ),
            Fact(
                "Fishermen claim the {N} bell carries {num} miles across the water on a windless night.",
                "how far does {N} bell carry",
                "which chime can mariners hear far offshore in still weather",
            ),
            Fact(
                "During the frost of {year2} the {N} bell split along its rim and had to be recast.",
                "why was {N} bell recast",
                "what happened when freezing weather cracked the town chime",
            ),
        ),
    ),
    TopicKind(
        "lighthouse",
        ("{N}", "{N} lighthouse", "the {N} lighthouse"),
        (
            Fact(
                "The lighthouse at {N} was first lit in {year} and burned whale oil until the harbour was dredged.",
                "when was {N} lighthouse first lit",
                "which coastal beacon originally ran on fuel taken from whales",
            ),
            Fact(
                "Keepers of the {N} lighthouse had to climb {num} steps to reach the lamp room.",
                "how many steps in {N} lighthouse",
                "whose tower attendants ascended a long staircase to tend the flame",
                (120, 260),
            ),
            Fact(
                "A storm in {year2} tore the lantern glass from the {N} lighthouse and left the coast dark "
                "for a month.",
                "what damaged the {N} lighthouse",
                "which beacon went unlit for weeks after a tempest shattered its panes",
            ),
        ),
    ),
    TopicKind(
        "apple",
        ("{N}", "{N} apple", "the {N} apple"),
        (
            Fact(
                "The {N} apple was bred in {year} by crossing a russet with a wild crab tree.",
                "how was the {N} apple bred",
                "which fruit variety came from mixing a russet and a hedgerow tree",
            ),
            Fact(
                "Growers store the {N} apple until spring because its flesh sweetens in the cold.",
                "why store {N} apples until spring",
                "which orchard fruit tastes sweeter after months in a chilly cellar",
            ),
            Fact(
                "A blight in {year2} killed nearly every {N} apple tree in the valley except {num} in a "
                "monastery garden.",
                "what nearly wiped out {N} apples",
                "which fruit tree survived a disease only behind the walls of a cloister",
            ),
        ),
    ),
    TopicKind(
        "bridge",
        ("{N}", "{N} bridge", "the {N} bridge"),
        (
            Fact(
                "The {N} bridge was built in {year} with stones taken from a ruined abbey nearby.",
                "what is {N} bridge built from",
                "which river crossing reused masonry from a derelict monastery",
            ),
            Fact(
                "Carts crossing the {N} bridge paid a toll of {num} pennies until the road was made free.",
                "toll for crossing {N} bridge",
                "where did wagon drivers have to pay coins to pass over the river",
            ),
            Fact(
                "Floods in {year2} swept away the middle arch of the {N} bridge and it was rebuilt in iron.",
                "when did {N} bridge collapse",
                "which span lost its central vault to high water and got a metal replacement",
            ),
        ),
    ),
    TopicKind(
        "schooner",
        ("{N}", "schooner {N}", "the schooner {N}"),
        (
            Fact(
                "The schooner {N} was launched in {year} and carried timber between the northern ports.",
                "when was the schooner {N} launched",
                "which sailing vessel hauled lumber along the northern coast",
            ),
            Fact(
                "Her crew claimed the {N} once outran a revenue cutter with {num} barrels of brandy aboard.",
                "what did the {N} outrun",
                "which boat escaped customs officers while smuggling liquor",
                (20, 90),
            ),
            Fact(
                "The {N} ran aground on a sandbar in {year2} and her figurehead now hangs in a tavern.",
                "where is the {N} figurehead",
                "whose carved bow ornament ended up decorating an inn after a wreck",
            ),
        ),
    ),
    TopicKind(
        "clock",
        ("{N}", "{N} clock", "the {N} clock"),
        (
            Fact(
                "The tower clock of {N} has run {num} minutes slow ever since its pendulum was replaced in {year}.",
                "why is {N} clock slow",
                "which town timepiece has lagged behind since a part was swapped",
            ),
            Fact(
                "Every noon the {N} clock plays a short tune composed by a local organist.",
                "what tune does {N} clock play",
                "which public timekeeper performs a melody written by a church musician at midday",
            ),
            Fact(
                "Children in {N} are told that the clock stops whenever someone tells a lie beneath it.",
                "{N} clock legend about lies",
                "which timepiece is said to halt when falsehoods are spoken under it",
            ),
        ),
    ),
    TopicKind(
        "cheese",
        ("{N}", "{N} cheese", "the {N} cheese"),
        (
            Fact(
                "{N} cheese is aged for {num} months in limestone caves beside the river.",
                "where is {N} cheese aged",
                "which dairy product matures for a long time underground in rock hollows",
                (6, 30),
            ),
            Fact(
                "The rind of {N} cheese is washed in cider every week, which turns it orange.",
                "why is {N} cheese rind orange",
                "which curd wheel gets bathed in fermented apple juice to colour its skin",
            ),
            Fact(
                "In {year} a royal decree allowed only farms in the parish of {N} to sell the cheese under that name.",
                "who may sell {N} cheese",
                "which dairy product has a protected name granted by a king",
            ),
        ),
    ),
    TopicKind(
        "festival",
        ("{N}", "{N} festival", "the {N} festival"),
        (
            Fact(
                "The {N} lantern festival began in {year} to mark the end of a long famine.",
                "why did the {N} festival begin",
                "which celebration with lamps commemorates surviving years of hunger",
            ),
            Fact(
                "At the {N} festival {num} paper boats carrying candles are set adrift on the lake.",
                "what floats at {N} festival",
                "at which celebration do people launch little lit vessels onto the water",
                (100, 900),
            ),
            Fact(
                "Visitors to the {N} festival must not speak during the hour after sunset.",
                "{N} festival silence rule",
                "at which event are guests forbidden to talk once dusk falls",
            ),
        ),
    ),
    TopicKind(
        "observatory",
        ("{N}", "{N} observatory", "the {N} observatory"),
        (
            Fact(
                "The observatory at {N} was founded in {year} by a widow who sold her jewels to buy the telescope.",
                "who founded {N} observatory",
                "which stargazing station was paid for with a widow's gems",
            ),
            Fact(
                "Astronomers at {N} catalogued {num} faint comets with the observatory's brass refractor.",
                "what did {N} astronomers catalogue",
                "where did sky watchers record many dim visitors with tails",
                (11, 60),
            ),
            Fact(
                "Snow collapsed the wooden dome of the {N} observatory in {year2}, and it was rebuilt in copper.",
                "{N} observatory dome material",
                "which telescope house had its timber roof crushed by winter weather",
            ),
        ),
    ),
    TopicKind(
        "windmill",
        ("{N}", "{N} windmill", "the {N} windmill"),
        (
            Fact(
                "The windmill at {N} ground flour for {num} villages until steam mills opened in {year}.",
                "{N} windmill villages served",
                "which sail-driven grinder supplied bread meal to the surrounding hamlets",
            ),
            Fact(
                "The sails of the {N} windmill were painted blue to ward off lightning, according to the millers.",
                "why are {N} windmill sails blue",
                "whose vanes were coloured to protect against storms, as the grinders believed",
            ),
            Fact(
                "The last miller of {N} left the windmill to the village on condition that it never grind again.",
                "who inherited the {N} windmill",
                "which grain tower was bequeathed to a community that promised to keep it idle",
            ),
        ),
    ),
    TopicKind(
        "codex",
        ("{N}", "{N} codex", "the {N} codex"),
        (
            Fact(
                "The {N} codex was copied by {num} monks over eleven winters and bound in sealskin.",
                "how was the {N} codex bound",
                "which handwritten volume has covers made from the hide of a marine animal",
            ),
            Fact(
                "Scholars learned in {year2} that the {N} codex hides an older poem scraped beneath its ink.",
                "what is hidden in {N} codex",
                "which old parchment book conceals verses erased underneath the visible writing",
            ),
            Fact(
                "The {N} codex was stolen by a travelling bishop and returned only after a ransom of wool.",
                "who stole the {N} codex",
                "which manuscript did a churchman take and give back for payment in fleece",
            ),
        ),
    ),
    TopicKind(
        "spring",
        ("{N}", "{N} spring", "the {N} spring"),
        (
            Fact(
                "The spring at {N} is said to cure fevers, and pilgrims have visited it since {year}.",
                "what does {N} spring cure",
                "which water source do travellers seek out to heal high temperatures",
            ),
            Fact(
                "The water of {N} spring stays at {num} degrees in both summer and winter.",
                "temperature of {N} spring water",
                "where does a fountain keep exactly the same warmth through every season",
                (9, 19),
            ),
            Fact(
                "A landowner who fenced the {N} spring in {year2} was forced by a riot to tear the fence down.",
                "who fenced the {N} spring",
                "which public fountain was enclosed by a squire until angry villagers objected",
            ),
        ),
    ),
)
"""Twelve topic kinds; a document uses up to twelve (one subject of each kind, plus distractor subjects)."""

NAME_HEADS = ("Vark", "Morl", "Quen", "Tash", "Brev", "Ostr", "Halv", "Dunm", "Serk", "Kelv", "Vorn", "Lisk", "Grav")
NAME_TAILS = ("holt", "wick", "mere", "stead", "ford", "vale", "brook", "moor", "gate", "ridge", "combe", "thorpe")
"""Invented subject names are a head and a tail ("Varkholt"): 156 names, none of them in the bundled corpora."""
