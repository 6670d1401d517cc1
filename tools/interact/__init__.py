"""Questions and plan review: ``ask_user_question``, ``exit_plan_mode`` and their providers."""
