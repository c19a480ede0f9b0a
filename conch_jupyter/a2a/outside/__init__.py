"""Calling outside agents: the guarded client, cards and their signatures, pastes and the kept
list."""
