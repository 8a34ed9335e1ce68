"""Voice: hearing a note, speaking a reply; the audio ports and the formats they use."""
