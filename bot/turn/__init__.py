"""A tutor turn: a learner's message in, a Turn out; its prompt, recall, commands, limits."""
