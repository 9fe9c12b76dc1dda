"""The message transport: consumer groups, schedules and leases, in memory or on Redis."""
