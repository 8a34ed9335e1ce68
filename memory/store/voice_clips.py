"""Spoken replies as stored: the speech model's OGG/Opus audio, kept for delivery (Telegram
takes it uploaded, Twilio fetches it from its signed link), found again by id and nonce, and
pruned once their links have expired, like /progress charts."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import select

from memory.database.models import VoiceClip
from memory.store.charts import Linked


@dataclass(frozen=True)
class StoredClip:
    """A spoken reply as delivery needs it: whose it is, the audio, its type, its nonce."""

    id: int
    learner_id: int
    nonce: str
    audio: bytes
    content_type: str


class VoiceClips(Linked):
    """Spoken replies, saved, found and pruned."""

    model = VoiceClip

    def save(self, learner_id: int, audio: bytes, content_type: str) -> tuple[int, str]:
        """Store a spoken reply; its id and nonce. Raises LearnerGone when the learner was
        forgotten meanwhile."""
        return self._save(learner_id, {"audio": audio, "content_type": content_type})

    def find(self, clip_id: int) -> StoredClip | None:
        """The clip with `clip_id`, for delivering it; None when it is gone."""
        columns = (VoiceClip.id, VoiceClip.learner_id, VoiceClip.nonce, VoiceClip.audio)
        with self.single.connect() as connection:
            row = connection.execute(
                select(*columns, VoiceClip.content_type).where(VoiceClip.id == clip_id)
            ).first()
        if row is None:
            return None
        return StoredClip(
            int(row.id), int(row.learner_id), row.nonce, bytes(row.audio), row.content_type
        )

    def get(self, clip_id: int, nonce: str) -> StoredClip | None:
        """The clip a link names; None when it is gone (pruned, or its learner forgotten) or
        the nonce is not its own."""
        clip = self.find(clip_id)
        if clip is None or not secrets.compare_digest(clip.nonce.encode(), nonce.encode()):
            return None
        return clip
