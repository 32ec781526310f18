"""English irregular verb forms, for the words a stemmer cannot join.

The index stems with porter, which folds "adopted" into "adopt" but leaves "bought" and
"buy", "caught" and "catch", "spent" and "spend" apart: a question asks "what did I buy"
and the owner wrote "I bought". ``forms`` gives the other forms of such a verb, which recall
searches for at a lower weight. Forms that are mostly other words ("rose", "left",
"found", "ground", "lay") are left out: they would pull in more noise than they find.
"""

from __future__ import annotations

_TABLE = """
arise arose arisen | awake awoke awoken | beat beaten | become became | begin began begun
bend bent | bite bit bitten | bleed bled | blow blew blown | break broke broken
breed bred | bring brought | build built | burn burnt | buy bought | catch caught
choose chose chosen | cling clung | come came | creep crept | deal dealt | dig dug
draw drew drawn | dream dreamt | drink drank drunk | drive drove driven | eat ate eaten
feed fed | feel felt | fight fought | flee fled | fly flew flown | forbid forbade forbidden
forget forgot forgotten | forgive forgave forgiven | freeze froze frozen
get got gotten | give gave given | go went gone | grow grew grown | hang hung
hear heard | hide hid hidden | hold held | keep kept | kneel knelt | know knew known
lead led | leap leapt | learn learnt | lend lent | lose lost | make made | mean meant
meet met | pay paid | prove proven | ride rode ridden | ring rang rung | run ran
say said | see saw seen | seek sought | sell sold | send sent | shake shook shaken
shine shone | shoot shot | show shown | shrink shrank shrunk | sing sang sung
sink sank sunk | sit sat | sleep slept | slide slid | speak spoke spoken | speed sped
spend spent | spill spilt | spin spun | steal stole stolen | stick stuck | sting stung
strike struck | swear swore sworn | sweep swept | swim swam swum | swing swung
take took taken | teach taught | tear tore torn | tell told | think thought
throw threw thrown | understand understood | wake woke woken | wear wore worn
weave wove woven | weep wept | win won | write wrote written
"""


def word_groups(text: str) -> dict[str, tuple[str, ...]]:
    """Each word of ``text``'s groups -> the other words of its group. Groups are separated
    by "|" or a line end (a group never runs on into the next line)."""
    table: dict[str, tuple[str, ...]] = {}
    for group in text.replace("\n", "|").split("|"):
        words = tuple(group.split())
        for word in words:
            table[word] = tuple(w for w in words if w != word)
    return table


_FORMS = word_groups(_TABLE)


def forms(word: str) -> tuple[str, ...]:
    """The other forms of ``word`` (lower case) if it is an irregular verb, else ()."""
    return _FORMS.get(word, ())
