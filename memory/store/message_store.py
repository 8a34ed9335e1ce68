"""The message store: one engine's learners, conversations, memory state, ledger,
inspection, recall, review, /progress charts, spoken replies, /forget's requests and scrubs,
check-ins and the chat history's retention, each a part named for its domain; a consumer that
needs one part takes just it."""

from __future__ import annotations

from sqlalchemy import Engine

from memory.clock import Clock, utcnow
from memory.recall.search import Recall
from memory.review.reviews import Reviews
from memory.store.charts import Charts
from memory.store.checkins import Checkins
from memory.store.conversation import Conversation
from memory.store.forget_requests import ForgetRequests
from memory.store.history import History
from memory.store.inspection import Inspection
from memory.store.learners import Learners
from memory.store.ledger import Ledger
from memory.store.memory_state import MemoryState
from memory.store.scrubs import Scrubs
from memory.store.voice_clips import VoiceClips


class Store:
    """Every part of the message store, built from one engine, stamping rows with `clock`'s
    time."""

    def __init__(self, engine: Engine, clock: Clock = utcnow) -> None:
        self.learners = Learners(engine, clock)
        self.forget_requests = ForgetRequests(engine, clock)
        self.conversation = Conversation(engine, clock)
        self.memory = MemoryState(engine, clock)
        self.ledger = Ledger(engine, clock)
        self.inspection = Inspection(engine, clock)
        self.recall = Recall(engine, clock)
        self.reviews = Reviews(engine, clock)
        self.charts = Charts(engine, clock)
        self.voice_clips = VoiceClips(engine, clock)
        self.scrubs = Scrubs(engine, clock)
        self.checkins = Checkins(engine, clock)
        self.history = History(engine, clock)
