"""Low-lexical-overlap needle/question pairs, written for this project: the question shares no content word
with its needle; an association links them (the Prado is in Madrid; a vegan eats no cheese).

Each pair is a needle with a `{name}` slot and a predicate; the question is "Which character <predicate>?"
and the reply starts "The character who <predicate> is". The answer is the name put in the slot, drawn
from NAMES: invented names, so no haystack mentions them (tests check both properties).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LowLexPair:
    """A needle sentence with a {name} slot and the predicate its question asks about."""

    needle: str
    predicate: str  # "has been to Madrid": asked as "Which character has been to Madrid?"

    def question(self) -> str:
        return f"Which character {self.predicate}?"

    def answer_prefix(self) -> str:
        return f"The character who {self.predicate} is"


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _pair(needle: str, predicate: str) -> LowLexPair:
    return LowLexPair(needle, predicate)


PAIRS = (
    _pair("Yes, {name} lives right next to the Prado.", "has been to Madrid"),
    _pair("{name} took a photograph beneath the Eiffel Tower last spring.", "has visited France"),
    _pair("{name} climbed the steps of the Acropolis at sunrise.", "has been to Athens"),
    _pair("{name} drifted in a gondola under the Rialto Bridge.", "has been to Venice"),
    _pair("{name} queued for hours to see the Terracotta Army.", "has travelled to China"),
    _pair("{name} watched dawn break over Angkor Wat.", "has been to Cambodia"),
    _pair("{name} got lost in the Grand Bazaar while hunting for carpets.", "has been to Istanbul"),
    _pair("{name} bought a pretzel outside the Brandenburg Gate.", "has visited Berlin"),
    _pair("{name} rode a camel around the pyramids of Giza.", "has travelled to Egypt"),
    _pair("{name} heard Big Ben chime while crossing Westminster Bridge.", "has visited London"),
    _pair("{name} hiked the Inca Trail up to Machu Picchu.", "has been to Peru"),
    _pair("{name} sunbathed on Copacabana beach all of last January.", "has been to Brazil"),
    _pair("{name} sang on the steps of the Sydney Opera House.", "has been to Australia"),
    _pair("{name} sipped a stout at the Guinness Storehouse.", "has visited Ireland"),
    _pair("{name} skied down slopes facing the Matterhorn.", "has been to Switzerland"),
    _pair("{name} fed crackers to the deer roaming Nara Park.", "has visited Japan"),
    _pair("{name} watched the aurora from a harbour in Reykjavik.", "has been to Iceland"),
    _pair("{name} wandered the Alhambra gardens at dusk.", "has been to Spain"),
    _pair("{name} posed with the Little Mermaid statue near Nyhavn.", "has been to Denmark"),
    _pair("{name} photographed the Golden Gate Bridge from a ferry.", "has been to California"),
    _pair("{name} has followed a strict vegan diet since childhood.", "cannot eat cheese"),
    _pair("{name} suffers from coeliac disease.", "must skip the bread basket"),
    _pair("{name} grew up speaking Flemish at home.", "understands Dutch"),
    _pair("{name} reads Tolstoy in the original.", "knows Russian"),
    _pair("{name} translated Don Quixote for a small publisher.", "knows Spanish"),
    _pair("{name} plays the cello in a string quartet.", "is a musician"),
    _pair("{name} fills cavities at a clinic downtown.", "is a dentist"),
    _pair("{name} spends every night shift in the emergency ward.", "works at a hospital"),
    _pair("{name} keeps three beehives behind the cottage.", "harvests honey"),
    _pair("{name} broke a wrist snowboarding and wore a cast for weeks.", "had a fracture"),
    _pair("{name} adopted a golden retriever from the shelter.", "owns a dog"),
    _pair("{name} celebrated a ninetieth birthday last week.", "is elderly"),
    _pair("{name} won gold in the Olympic marathon.", "is a runner"),
    _pair("{name} once walked on the Moon.", "is an astronaut"),
    _pair("{name} bakes sourdough before dawn for the village.", "makes bread"),
    _pair("{name} holds a licence to fly a Cessna on weekends.", "can operate an aircraft"),
    _pair("{name} was stung by a jellyfish while snorkelling.", "has swum in the sea"),
    _pair("{name} keeps a tarantula in a glass tank.", "owns a spider"),
    _pair("{name} grows tomatoes and courgettes on an allotment.", "is a gardener"),
    _pair("{name} lost a queen to a clever fork in the final round.", "plays chess"),
    _pair("{name} is saving up for a new saddle for the mare.", "rides horses"),
    _pair("{name} sleeps under a mosquito net in the Amazon basin.", "lives in a rainforest"),
)

NAMES = _words(
    """
    Avrielle Brannoc Cestine Dovrel Emberlin Faolin Gwennoc Haldric Ilvane Jorelle Kestrin Lunetta Morvenna
    Orvyn Quillan Sabrelle Tavrin Ulvida Veskar Wrenlow Yselka Zorwin Aldrissa Belvane Corentyn Dessaly
    Evandrel Fenneth Graylin Hesperel
    """
)
