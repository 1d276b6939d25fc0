"""The multi-turn protocol Kevin was trained with: prompts, feedback, parsing replies, the token budget."""
