"""Sentence templates for the synthetic narrative, grouped by the role they play in a paragraph.

Slots: A and B are the paragraph's two people (A, Af first name, Al surname, At title and surname,
Ahe/Ahim/Ahis/Aself pronouns, Ajob, Atrait, Ahome, Aage, Aorg); C/Cf is someone else in the cast;
T is the paragraph's town, V its venue, O an organisation, E an event; the rest (obj, a_obj, adj,
a_adj, weather, time, ...) are drawn per sentence. The first letter of every sentence is capitalized
after filling, so templates may start with a lower-case slot.
"""

from __future__ import annotations


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.strip().splitlines() if line.strip())


INTRO = _lines("""
{A} was {a_Ajob} from {Ahome}, {Aage} years old and known to everyone as {a_Atrait} sort of person.
Nobody in {T} had heard of {A} until the {season} {Ahe} took rooms above {V}.
{A}, who had worked for {Aorg} for most of {Ahis} life, arrived in {T} on a {day} in {month}.
The new {Ajob} was called {A}; {Ahe} had come from {Ahome} with one suitcase and {a_obj}.
{At} was the kind of {Ajob} people sent for when everyone else had given up.
It was {A}, {a_Atrait} {Ajob} with {color} gloves and {a_adj} coat, who first noticed the change.
Among the newcomers that year was {A}, formerly of {Ahome}, who described {Aself} as {a_Ajob} and little else.
{A} had grown up in {Ahome} and spoke of it often, though {Ahe} had not been back since {old_year}.
""")

SETTING = _lines("""
{time}, {weather}.
In {T}, {weather}, and the lamps along {street} had been lit early.
The {season} of {year} was remembered in {T} as an unusually {adj} one.
{V} was {adj} at that hour, and smelled faintly of {smell}.
By the time {A} reached {V}, {weather}.
It was a {day} in {month}, and {weather}.
From {V} one could hear {sound} and, further off, {sound2}.
{time}, {V} was {adj} and almost deserted.
The road from {T2} to {T} follows the {river} for most of its length.
Outside, {weather}; inside {V}, someone had lit the stove.
That {season}, {weather} for days on end and nobody went far.
{time}, the light came in low across {feature} and lay on the floor in long {color} bands.
The walk from {street} to {V} took ten minutes, or twenty if one stopped to talk.
""")

ACTION = _lines("""
{A} {moved} across {V} and stopped by {feature}.
{Ahe} put {a_obj} down on {feature} and waited.
{A} {moved} to {feature}, picked up the {obj} and turned it over in {Ahis} hands.
{Af} opened the {obj2} carefully, as though something might be inside.
{At} spent the rest of the morning sorting letters for {O}.
{Ahe} wrote three lines in {Ahis} notebook, crossed out two of them, and closed it.
{A} and {B} {moved} together as far as the corner of {street}, then went their separate ways.
{Bf} handed {Af} the {obj} without a word.
{Af} knocked twice at the door of {V} before anyone answered.
{Ahe} counted the chairs twice and came to a different number each time.
{B} was already waiting at {feature} when {Af} arrived.
{Af} took the long way round, past the {tree} trees and the {river}.
{Ahe} poured {drink} for both of them and sat down opposite {Bf}.
{At} cleared {feature} of old newspapers and spread out the {obj} to dry.
{A} ate {food} standing up, looking out at the street.
Somebody had left {a_obj} on {feature}; {Af} moved it out of the way without comment.
{B} {moved} in, shook the rain from {Bhis} coat and asked for {drink}.
{Af} read the notice on the board at {V} twice before {Ahe} understood it.
{A} fetched the {obj} from the {room} and carried it down to {V}.
{Af} and {Bf} spent most of the afternoon arguing about {E}.
{Ahe} mended the {obj} with a length of wire and a good deal of patience.
{At} signed the register at {V} and took a seat near {feature}.
{Bf} promised to bring the {obj2} back by {day}, and for once kept the promise.
{A} {moved} home by way of {street}, where the shops were closing.
{Af} locked {V}, tried the handle twice, and walked back to {T}.
{Ahe} paused at {feature}, listening to {sound}.
{B} offered to help; {Af} accepted, which surprised them both.
{At} taught {Bf} how to rewind the {obj}, though it took most of an hour.
""")

DESCRIBE = _lines("""
{V} had {color} walls, {a_adj} floor and a smell of {smell} that never quite went away.
The {obj} was {adj} and {adj2}, and older than anyone in the room.
{O} occupied {a_adj} {material} building on {street}, with its name painted over the door.
From {feature} one could see the {river} and the roofs of {T} beyond it.
There were {n} {material} benches in {V}, most of them {adj}.
{T} was {a_adj} town of perhaps {n} thousand people, built where the {river} bends north.
The houses on {street} were {adj} and {color}, each with a small yard at the back.
Everything in the {room} was {adj}, except {a_material} chest that somebody kept polished.
Beside {feature} stood {a_adj} cabinet full of things nobody had used in years.
{A} was tall and {Atrait}, with a habit of tapping {Ahis} fingers when {Ahe} was thinking.
{Bf} had {color} eyes and a voice that carried across a crowded room.
The garden behind {V} ran down to the {river} in three uneven terraces.
{O} kept its records in {n} {material} cabinets, alphabetised by a system only one clerk understood.
{E} had been held at {V} for as long as anyone could remember.
Over {feature} hung {a_color} banner left over from {E}.
{V} was never quite warm, even in {month}.
The view from the top of {street} took in the whole of {T}, the {river} and, on a clear day, {T2}.
""")

INNER = _lines("""
{Af} wondered, not for the first time, whether {Ahe} had made a mistake in leaving {Ahome}.
{Ahe} felt a small, unreasonable {emotion} at the sight of the {obj}.
{A} remembered {E} of {old_year}, when the {river} had burst its banks.
It occurred to {Af} that {Bf} had never once mentioned {O}.
{Ahe} had promised {Aself} that this {season} would be different.
{Af} thought of {Ahis} grandmother in {Ahome}, who had kept {a_obj} on the mantelpiece for fifty years.
Later, {Af} could not say exactly why the conversation had left {Ahim} with such {emotion}.
{Ahe} suspected that {Bf} knew more about the {obj} than {Bhe} admitted.
The memory of {T2} came back to {Af} at odd moments: the market, the ferry, the smell of {smell}.
{Af} had never liked {V}, though {Ahe} could not have said why.
For a long time afterwards {Ahe} regretted not asking {Bf} about the letter.
{A} was not given to {emotion}, but the news from {T2} unsettled {Ahim}.
{Ahe} decided to say nothing to {Cf} until {Ahe} was sure.
""")

HISTORY = _lines("""
{O} was founded in {old_year} by {a_Ajob} from {T2} and a partner whose name nobody now recalls.
In {old_year} the {river} froze so hard that carts were driven across it from {T} to {T2}.
{E} was first held in {old_year}, in a field that is now {street}.
{O} moved to its present building in {old_year}, after a fire destroyed the old one on {street}.
For most of the last century, {T} depended on {O} and on the traffic of the {river}.
The records of {O} for the years before {old_year} were lost in a flood.
{V} was built in {old_year} as {a_adj} warehouse and has been many things since.
According to the parish records, there had been {a_Ajob} on {street} since at least {old_year}.
{T} received its railway in {old_year}, and {O} its first telephone a few years later.
When {O} merged with {O2} in {year}, half the staff resigned in protest.
By {year} {E} had grown so large that it moved from {V} to the fields outside {T}.
Older residents still call {street} by its former name, which it lost in {old_year}.
""")

TRANSITION = _lines("""
Nothing more was said about it that day.
Three days passed before anyone mentioned the letter again.
The rest of the week was quiet.
{time}, things looked rather different.
It was almost {month} before the matter was settled.
In the end, it was {Cf} who solved the problem, by accident.
Not everyone agreed.
{E} came and went.
By {day}, the whole of {T} had heard the story, in several versions.
Nobody slept much that night.
After that, {A} kept the {obj} locked away.
It rained for the rest of the month.
""")

BEATS = _lines("""
{Af} looked out of the window.
{Ahe} set down the {obj}.
{Bf} shrugged.
There was a short silence.
{Af} laughed in spite of {Aself}.
{Bf} did not answer at once.
{Ahe} folded {Ahis} arms.
Somewhere outside, {sound} started up.
{Bf} glanced at the clock.
{Af} frowned at the {obj}.
""")
