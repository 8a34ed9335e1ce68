"""The memory jobs: the rolling summary and the learned profile, and their coordinator."""
