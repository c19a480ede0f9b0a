"""The A2A door: its rules, calls, card, pairings and the peer chats it opens."""
