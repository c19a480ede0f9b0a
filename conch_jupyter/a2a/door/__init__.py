"""The door's protocol side, pure: who gets in and how much a key may ask (`rules`), what a call
means (`calls`, `params`), the card (`card`) and where a request came from (`forwarded`). The
door as an application (pairings, the service, its turn, its HTTP side) is the `door` package."""
