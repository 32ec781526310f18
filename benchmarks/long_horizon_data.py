"""The built questions of ``benchmarks/long_horizon.py``: standing instructions with the
requests that depend on them, and pairs of statements that contradict each other, with a
question about each. Written by hand for the benchmark (not from LongMemEval)."""

from __future__ import annotations

#: (the owner's standing instruction, a later request that depends on it).
INSTRUCTIONS: tuple[tuple[str, str], ...] = (
    (
        "From now on, always give me distances and weights in metric units, never miles or pounds.",
        "How far is it from Boston to New York by car?",
    ),
    (
        "Please keep your answers short from now on, three sentences at most.",
        "Can you explain how a heat pump works?",
    ),
    (
        "When you suggest recipes, remember I don't eat any meat or fish at all.",
        "What should I cook for a dinner party this weekend?",
    ),
    (
        "Whenever you write code for me, use Python with type hints, not JavaScript.",
        "Write me a small function that removes duplicate lines from a file.",
    ),
    (
        "Always address me as Sam, not by my full name.",
        "Draft an email to my landlord asking about the broken heater.",
    ),
    (
        "Please always show prices in euros, I live in Lisbon now.",
        "How much does a good espresso machine cost?",
    ),
    (
        "For any travel plans, avoid flights: I only travel by train.",
        "Plan a weekend trip to Barcelona for me.",
    ),
    (
        "Don't ever recommend horror films to me, I can't stand them.",
        "What movie should I watch tonight?",
    ),
    (
        "When you give me workout plans, keep in mind my left knee is injured, no running.",
        "Give me a workout routine for this week.",
    ),
    (
        "Please write dates in the format day/month/year in everything you send me.",
        "Make me a schedule for the next three project milestones.",
    ),
    (
        "I'd like all summaries you write for me as bullet points, not paragraphs.",
        "Summarise the main ideas of the article on remote work I mentioned.",
    ),
    (
        "Use a formal tone in anything you draft for my work emails.",
        "Help me reply to my manager about moving the deadline.",
    ),
)

#: (an early statement, a later one that disagrees, a question about the thing).
CONTRADICTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "I'm allergic to peanuts, so I have to check every label.",
        "I had a peanut butter sandwich for lunch today, I eat them all the time.",
        "Am I allergic to peanuts?",
    ),
    (
        "My sister Clara lives in Denver with her two kids.",
        "My sister Clara just told me she has lived in Seattle her whole adult life.",
        "Where does my sister Clara live?",
    ),
    (
        "I've never been to Japan, it's on my bucket list.",
        "When I was in Tokyo a few years back I loved the food markets.",
        "Have I ever been to Japan?",
    ),
    (
        "My car is a 2015 Honda Civic, it still runs great.",
        "I drive a Ford pickup, had it since 2012.",
        "What car do I drive?",
    ),
    (
        "I hate coffee, I only drink green tea in the morning.",
        "I need my three cups of coffee before I can think in the morning.",
        "What do I drink in the morning?",
    ),
    (
        "My birthday is on the 14th of February.",
        "My birthday is coming up on the 3rd of October, I'm planning a party.",
        "When is my birthday?",
    ),
    (
        "I work from home full time, no commute for me.",
        "The commute to the office every day takes me an hour each way.",
        "Do I commute to an office?",
    ),
    (
        "I have a golden retriever called Biscuit.",
        "I've never had a dog, I'm more of a cat person with my cat Pepper.",
        "What pets do I have?",
    ),
    (
        "I ran my first marathon in Chicago last autumn.",
        "I've never run more than ten kilometres in one go.",
        "Have I run a marathon?",
    ),
    (
        "I'm a vegetarian and have been for ten years.",
        "Grilled steak is my favourite dinner, I have it every Friday.",
        "Am I vegetarian?",
    ),
)
