"""Benign requests that use violent or alarming words: the project's own training rows for the
content-safety head (safe, group `sensitive`), written here rather than taken from a data set.

The public sets teach the unsafe head that "kill", "bomb" or "lethal" go with harm: their safe
rows with such words (Natural Questions and CLINC150 `*_sensitive_terms`, CyberSecEval's
false-refusal set) are mostly trivia, and a head trained on them refused "kill a process"
requests. These rows pair the same words with what ordinary users mean by them: processes
and containers, pests and weeds, photography and sport, idioms, history and household
safety. They are templates filled in deterministically, kept apart from the evaluation's
hand-written cases (trainers/guardrails/guard_eval.SOUNDS_DANGEROUS), which are never
trained on.
"""

from __future__ import annotations

from itertools import product

SOURCE = "ragrail_sensitive_terms"

_TECH_VERBS = ("kill", "terminate", "force quit", "nuke", "stop and remove")
_TECH_OBJECTS = (
    "a zombie process",
    "every process listening on port 8080",
    "a frozen Java app",
    "a runaway cron job",
    "a stuck Kubernetes pod",
    "a detached tmux session",
    "an idle SSH session",
    "a long-running Postgres query",
    "a Node.js server that ignores Ctrl-C",
    "all Chrome renderer processes",
    "a Celery worker",
    "a hung git rebase",
)
_TECH_FRAMES = (
    "How do I {verb} {obj}?",
    "What's the cleanest way to {verb} {obj} on Ubuntu?",
    "Is it safe to {verb} {obj} from a script?",
)
_PESTS = (
    "weeds in gravel paths",
    "fruit flies in the kitchen",
    "mold on bathroom grout",
    "aphids on roses",
    "bacteria on a wooden cutting board",
    "moss on a roof",
    "ants under the sink",
    "fleas on a dog",
)
_PEST_FRAMES = ("How do I kill {obj} without harsh chemicals?", "What kills {obj} fastest?")

_PHRASES = (
    "How do I blow up a photo to poster size without losing quality?",
    "How do I blow up an air mattress with a hair dryer?",
    "What's the best way to shoot fireworks with a phone camera?",
    "How should I shoot a free throw to stop missing short?",
    "Tips for shooting a wedding in harsh midday sun?",
    "How do I attack the Sicilian Defence as white?",
    "What's a killer opening line for a cover letter?",
    "How can I kill time on a six-hour layover?",
    "My stand-up set bombed last night; how do comedians recover?",
    "How do I execute a limit order on a brokerage app?",
    "How do I destroy old hard drives before recycling them?",
    "How do I dispose of leftover paint and solvents safely?",
    "Which garden plants are toxic to cats?",
    "Which cleaning products give off toxic fumes when combined?",
    "What are the early signs of carbon monoxide poisoning?",
    "What should I do if a toddler swallows a button battery?",
    "How can I tell whether a wild mushroom is poisonous?",
    "At what body temperature does a fever become dangerous?",
    "How much water is too much to drink in one day?",
    "Why is it dangerous to put water on a grease fire?",
    "What caused the explosion at Chernobyl's reactor 4?",
    "Why did the United States drop atomic bombs on Japan?",
    "How did gunpowder change siege warfare in the 1400s?",
    "What weapons did Roman legionaries carry?",
    "How do bomb-sniffing dogs get trained?",
    "How does a nuclear reactor avoid a meltdown?",
    "How do I sharpen a kitchen knife with a whetstone?",
    "What is the safest way to store a hunting rifle at home?",
    "How do I safely defrost a freezer that's iced over?",
    "Why do antibiotics kill bacteria but not viruses?",
    "How do white blood cells attack an infection?",
    "What makes a black widow spider's venom so strong?",
    "How do firefighters fight a chemical plant fire?",
    "How do crash-test dummies measure injuries?",
    "Which murder mystery novels have the best twists?",
    "How do I write a convincing villain for my fantasy novel?",
    "What's the plot of the film Kill Bill?",
    "How do I shoot and edit a short horror film on a budget?",
    "How do I beat the final boss in Elden Ring?",
    "What's the best strategy to destroy the enemy base in StarCraft?",
)


def rows() -> list[dict[str, object]]:
    """Every row, in a fixed order, in the content_safety layout (safe, label 0)."""
    texts = [
        frame.format(verb=verb, obj=obj)
        for frame, verb, obj in product(_TECH_FRAMES, _TECH_VERBS, _TECH_OBJECTS)
    ]
    texts += [frame.format(obj=obj) for frame, obj in product(_PEST_FRAMES, _PESTS)]
    texts += list(_PHRASES)
    return [{"text": t, "label": 0, "category": "safe", "source": SOURCE} for t in texts]
