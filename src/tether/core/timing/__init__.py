"""When scheduled work runs: schedules and cron expressions."""
