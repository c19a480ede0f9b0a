"""The door, as an application: paired agents reaching yours over A2A.

Owns who is paired (`pairing`: `pairings.json`), what the door does for a key that was let in
(`service.PeerService`), one of your agents answering a paired agent in words only (`turn`), and
the door on HTTP (`http`: a tornado message delegate before Jupyter's router), and the key its
cards are signed with (`signer`, sealed). The protocol it
speaks (the card, the calls, the params, the pure rules of who gets in) is `a2a.door`'s. Where
this server is reached, for the addresses it hands out, is `address`.

May import: `core`, `store`, `agents`, `providers`, `a2a` and `rounds`; never `server_ext`
(`http` reads the services it needs through a Protocol of its own).
"""
