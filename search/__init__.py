"""Architecture search: evaluators (MAD synthetic tasks, LM loss), the Optuna search engine, leaderboards."""
