"""What players do around their matches: accounts, their event feeds, challenges, the seek
queue and arenas. The gateway serves it; it builds on the projections and the core."""
