"""A2A, the protocol: the wire models of both versions (`wire`), reading what another agent sends
back (`reading`), signed cards (`signing`: the canonical form, a signature made and checked), the
door's pure rules, calls, params and card (`door`), and calling outside agents through the guarded
client (`outside`: the guard, cards, pastes, the kept list and the service that asks them).

May import: `core`, and `store.rows` (a door task on the wire is read from its stored row).
"""
