"""Calling outside agents: the guarded client, cards, pastes and the kept list."""
