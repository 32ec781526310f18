"""The extractive path: the plain first-person statements an owner makes, as facts,
with no model.

What counts: a declarative sentence of an owner turn whose subject is the owner ("I'm
allergic to peanuts", "my sister's wedding is on 12 June", "we use pyarrow, not
fastparquet", "I switched from X to Y"), or an instruction about how to answer ("always
answer in metric"). Each becomes one fact: the sentence with its leading subject put in
the third person ("The owner is allergic to peanuts."), a slot (subject ``owner``, an
entity named for what it is about: ``name``, ``home``, ``employer``, ``allergy-peanuts``,
``uses-pyarrow``, ...), the turn it came from, and the sentence itself as the quote: it
is verbatim in an owner turn, so it earns ``direct_user_statement`` (never above the
caller's cap).

Precision before recall: a sentence is skipped when it is a question (a ``?`` or a
question word first), a hypothetical (``if``, ``would``, ``maybe``, ``wish``, ...), a
negation of its own claim (``not``, ``n't``, ``never``, ``no longer`` before its first
comma: "we use pyarrow, not fastparquet" stays), reported or quoted speech (quote marks,
``said``, ``told``), code (fenced or indented blocks, inline code, lines with code
punctuation), quoted mail (``>``), tool output, or text redacted or ``[private]``. Only
owner turns are read: an assistant's, a tool's or an untrusted turn is never a source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tether.records import ExtractedFact, FactAuthority, Provenance, SourceTurn

#: A sentence with fewer words says too little; a longer one is rarely one fact.
MIN_WORDS = 3
MAX_WORDS = 40
#: How much of a sentence becomes the fact's text (the verbatim quote is bounded the same).
MAX_FACT_CHARS = 400
#: Facts from one turn at most (the statements with most content words first).
MAX_PER_TURN = 2
#: Content words a statement needs: a plain "I ..." sentence needs more than one of the
#: known forms ("I live in Berlin" says enough; "I felt great today" does not). Chosen on
#: LoCoMo's tuning half (benchmarks/locomo_extraction.py).
MIN_CONTENT = 3
MIN_FIXED_CONTENT = 2
RANK: dict[str, int] = {
    "sweep_inference": 1,
    "agent_reusable_conclusion": 2,
    "direct_user_statement": 3,
}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")
_CODE_CHARS = re.compile(r"[{}<>=|\\$#@^~`\[\]]|::|->|=>|\w\(|\)\s*;|;\s*$|/\w+/|\w\.\w+\(")
_DOTTED = re.compile(r"\b\w+\.\w+\.\w+\b")  # a.b.c: a module path or a version, not prose
_PLACEHOLDER = re.compile(r"\[(?:private|REDACTED[^\]]*)\]", re.I)

_QUESTION_FIRST = _words(
    "what why how when where who whom whose which can could would should shall will "
    "do does did is are am was were have has had may might must isn't aren't don't "
    "doesn't didn't won't wouldn't shouldn't couldn't can't anyone anybody"
)
_HYPOTHETICAL = _words(
    "if unless whether suppose supposing imagine maybe perhaps possibly probably "
    "might would could should wish hope hoping wonder wondering assume assuming "
    "pretend hypothetically guess i'd we'd i'll we'll think thinking"
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|nobody|none|neither|nor|cannot|no longer)\b|n['’]t\b", re.I
)
_REPORTED = re.compile(
    r"[\"“”«»]|\b(?:said|says|say|told|tells|asked|asks|wrote|writes|quote|quoted|"
    r"according|claims?|claimed|reckons?|heard)\b",
    re.I,
)
_TOOL_OUTPUT = re.compile(
    r"^\s*(?:traceback|error|warning|exception|fatal|\$|>>>|\d+\s*(?:passed|failed)|"
    r"at [\w.$]+\(|file \")",
    re.I,
)

_STOP = _words(
    "a an the and or but so to of in on at for from with by as into onto about over "
    "under after before than then that this these those there here it its it's i i'm "
    "i've me my mine myself we we're we've us our ours ourselves you your is am are "
    "was were be been being have has had do does did just really very also too still "
    "now some any all much many more most own one two quite lot lots bit kind sort "
    "get got getting gets thing things stuff like"
)
_S_EXCEPTIONS = _words("is was has does goes")
_PRESENT_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
_PAST = _words(
    "was were had did went made took got came saw found gave told felt left kept "
    "thought knew began ran brought bought caught taught sold held met paid sat stood "
    "understood wrote read heard spent lost won built sent lent meant put set let cut "
    "hit quit became grew drew threw flew wore tore swore chose froze spoke broke "
    "woke drove rode rose fell forgot"
)
_MODALS = _words("can could will would shall should may might must")
_ADVERBS = _words(
    "just also still always often usually recently finally actually really already "
    "even only sometimes totally mostly generally normally currently now"
)


def statements(
    turns: Iterable[SourceTurn],
    *,
    owner: str = "The owner",
    cap: FactAuthority = "direct_user_statement",
    segment: str | None = None,
    per_turn: int = MAX_PER_TURN,
) -> tuple[ExtractedFact, ...]:
    """The facts the owner stated in ``turns`` (owner turns only), in turn order, each
    citing its turn and quoting its sentence; one fact per slot (the first)."""
    out: dict[tuple[str, str], ExtractedFact] = {}
    for t in turns:
        if t.role != "owner":
            continue
        found = [s for s in sentences(t.text) if claim(s) is not None]
        found.sort(key=lambda sentence: -len(content_words(sentence)))
        for sentence in found[: max(0, per_turn)]:
            made = claim(sentence)
            assert made is not None
            text, entity = made
            fact = ExtractedFact(
                text=_third_person(text, owner),
                subject="owner",
                entity=entity,
                authority=_capped("direct_user_statement", cap),
                provenance=Provenance(
                    sessions=(t.session,),
                    segment=segment,
                    first_turn=t.turn,
                    last_turn=t.turn,
                    quote=sentence[:MAX_FACT_CHARS],
                    quote_session=t.session,
                    quote_turn=t.turn,
                ),
            )
            out.setdefault((fact.subject, fact.entity), fact)
    return tuple(out.values())


def _capped(authority: FactAuthority, cap: FactAuthority) -> FactAuthority:
    return authority if RANK[authority] <= RANK[cap] else cap


# -- sentences -------------------------------------------------------------------------


def prose(text: str) -> str:
    """``text`` without what is not the owner's own prose: fenced code, quoted lines
    (``>``), indented blocks, lines that read as code or tool output."""
    text = _FENCE.sub("\n", text)
    kept: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(">") or line.startswith(("    ", "\t")):
            kept.append("")
            continue
        if _TOOL_OUTPUT.match(stripped):
            kept.append("")
            continue
        kept.append(stripped)
    return "\n".join(kept)


def sentences(text: str) -> list[str]:
    """The owner's prose in ``text``, cut into sentences (each stripped), and a sentence
    into its statements where ", and I ..." joins two (never a hedged or asking one: "if
    it rains and I stay home" is one hypothetical, not a fact)."""
    out = []
    for piece in _SENTENCE_END.split(prose(text)):
        hedged = "?" in piece or any(
            w.lower().replace("’", "'") in _HYPOTHETICAL for w in _WORD.findall(piece)
        )
        for clause in [piece] if hedged else _CLAUSE.split(piece):
            s = clause.strip().lstrip("-*•").strip()
            if s:
                out.append(s)
    return out


def content_words(text: str) -> list[str]:
    """The words that carry meaning: lower case, stop words out."""
    return [w for w in (m.lower().replace("’", "'") for m in _WORD.findall(text)) if w not in _STOP]


# -- one sentence ------------------------------------------------------------------------

_LEAD = re.compile(
    r"^(?:(?:and|but|so|also|oh|well|yeah|yes|ok|okay|actually|btw|fyi|honestly|"
    r"basically|anyway|hey|hi|wow|haha|lol|just so you know|for the record|note that|"
    r"for context)\b[,!]?\s+)+",
    re.I,
)
_FIXED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^my name is\b|^i['’]?m called\b|^call me\b", re.I), "name"),
    (re.compile(r"^i (?:live|am based|['’]m based|reside) in\b", re.I), "home"),
    (re.compile(r"^i (?:work|['’]m working|am working) (?:at|for)\b", re.I), "employer"),
    (re.compile(r"^i (?:work|['’]m working|am working) as\b", re.I), "occupation"),
    (re.compile(r"^i prefer\b", re.I), "preference"),
    (re.compile(r"^(?:please )?always\b", re.I), "instruction"),
    (re.compile(r"^i (?:switched|moved|migrated|changed) from\b", re.I), "switched"),
    (re.compile(r"^(?:i['’]m|i am) allergic to\b", re.I), "allergy"),
    (re.compile(r"^(?:i|we) (?:use|are using|['’]re using|am using|['’]m using)\b", re.I), "uses"),
)
#: A short opening clause before the owner's subject ("Last Monday, I ...", "Since we
#: last spoke, I ..."): cut, so the statement after it is read.
_OPENER = re.compile(r"^[A-Z][\w'’ -]{0,40}?[,:]\s+(?=(?:I|I['’]m|I['’]ve|my|we|our)\b)")
#: Where one sentence holds two statements: "..., and we use pyarrow".
_CLAUSE = re.compile(r",?\s+(?:and|but)\s+(?=(?:I|I['’]m|I['’]ve|we|we['’]re|my|our)\b)")
#: The listener ("you", "your"): a sentence about them is not a fact about the owner.
_LISTENER = re.compile(r"\b(?:you|your|yours|yourself|you['’](?:re|ve|d|ll))\b", re.I)
_SUBJECT = re.compile(
    r"^(?:i|i['’]m|i['’]ve|i am|i have|we|we['’]re|we['’]ve|we are|my|our)\b", re.I
)


def claim(sentence: str) -> tuple[str, str] | None:
    """(the statement, its slot entity) when ``sentence`` is a plain first-person
    statement or an answering instruction; None otherwise."""
    s = _LEAD.sub("", sentence.strip()).strip()
    s = _OPENER.sub("", s)
    words = _WORD.findall(s)
    if not MIN_WORDS <= len(words) <= MAX_WORDS or len(s) > MAX_FACT_CHARS:
        return None
    if s.endswith("?") or "?" in s or _PLACEHOLDER.search(s):
        return None
    first = words[0].lower().replace("’", "'")
    if first in _QUESTION_FIRST and not _SUBJECT.match(s):
        return None
    low = [w.lower().replace("’", "'") for w in words]
    if any(w in _HYPOTHETICAL for w in low):
        return None
    head = s.split(",", 1)[0]
    if _NEGATION.search(head) or _REPORTED.search(s) or _LISTENER.search(s):
        return None
    if _CODE_CHARS.search(s) or _DOTTED.search(s):
        return None
    if not _SUBJECT.match(s) and not re.match(r"^(?:please )?always\b", s, re.I):
        return None
    if len(low) > 1 and low[1] in _MODALS:
        return None  # "I can ...", "we should ...": an ability or a wish, not a fact
    topic = content_words(s)
    fixed = any(p.match(s) for p, _ in _FIXED)
    if len(topic) < (MIN_FIXED_CONTENT if fixed else MIN_CONTENT):
        return None
    if re.match(r"^(?:please )?always (?:here|there|so|a|an|the|been|good|great|fun)\b", s, re.I):
        return None
    s = s.rstrip(".!;: ")
    return s, _entity(s, topic)


def _entity(text: str, topic: Sequence[str]) -> str:
    for pattern, kind in _FIXED:
        m = pattern.match(text)
        if m is None:
            continue
        if kind in {"name", "home", "employer", "occupation"}:
            return kind
        rest = content_words(text[m.end() :].split(",", 1)[0])
        return _key(kind, rest[:2] or topic[:2])
    m = re.match(r"^(?:my|our) ([a-z]+)(?:['’]s ([a-z]+))?", text, re.I)
    if m is not None:
        parts = [p.lower() for p in m.groups() if p]
        return _key("", parts)
    return _key("", topic[:3])


def entity_for(text: str) -> str:
    """A slot key for a fact's own text (a model's short fact): its leading content
    words, the owner's own name for them left out."""
    topic = [w for w in content_words(text) if w not in {"owner", "user", "owner's", "user's"}]
    return _key("", topic[:3])


def _key(kind: str, words: Sequence[str]) -> str:
    parts = [re.sub(r"[^a-z0-9]+", "-", w.lower()).strip("-") for w in words]
    body = "-".join(p for p in parts if p)
    key = f"{kind}-{body}" if kind and body else kind or body or "statement"
    return key[:64].strip("-") or "statement"


# -- the third person --------------------------------------------------------------------

_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?:i['’]m|i am)\b", re.I), "{o} is"),
    (re.compile(r"^i['’]ve\b", re.I), "{o} has"),
    (re.compile(r"^(?:we['’]re|we are)\b", re.I), "{o} and others are"),
    (re.compile(r"^we['’]ve\b", re.I), "{o} and others have"),
    (re.compile(r"^we\b", re.I), "{o} and others"),
    (re.compile(r"^my\b", re.I), "{o}'s"),
    (re.compile(r"^our\b", re.I), "{o}'s"),
    (re.compile(r"^call me\b", re.I), "{o} is called"),
)
_LATER = (
    (re.compile(r"\bmy\b"), "their"),
    (re.compile(r"\bme\b"), "them"),
    (re.compile(r"\bmyself\b"), "themself"),
    (re.compile(r"\bI['’]m\b"), "they are"),
    (re.compile(r"\bI\b"), "they"),
)


def _third_person(statement: str, owner: str) -> str:
    s = _LEAD.sub("", statement).strip()
    if re.match(r"^(?:please )?always\b", s, re.I):
        return f"{owner} asks: {s[0].upper()}{s[1:]}."[:MAX_FACT_CHARS]
    done = False
    for pattern, repl in _REWRITES:
        if pattern.match(s):
            s = pattern.sub(repl.format(o=owner), s, count=1)
            done = True
            break
    if not done:
        m = re.match(r"^i ([A-Za-z]+)\b(?: ([A-Za-z]+)\b)?", s, re.I)
        if m is not None and m.group(1).lower() in _ADVERBS and m.group(2):
            s = f"{owner} {m.group(1)} {_verb(m.group(2))}{s[m.end() :]}"
        elif m is not None:
            s = f"{owner} {_verb(m.group(1))}{s[m.end(1) :]}"
    head, sep, tail = s.partition(owner)
    for pattern, repl in _LATER:
        tail = pattern.sub(repl, tail)
    return f"{head}{sep}{tail}".strip()[: MAX_FACT_CHARS - 1] + "."


def _verb(word: str) -> str:
    """``word`` after "I", as it reads after a third-person subject (present tense
    gets its ``s``; a past form or an adverb stays)."""
    w = word.lower()
    if w in _PRESENT_IRREGULAR:
        return _PRESENT_IRREGULAR[w]
    if w in _PAST or w.endswith(("ed", "ly")) or w in _S_EXCEPTIONS:
        return word
    if w.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    if w.endswith("y") and len(w) > 2 and w[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"
