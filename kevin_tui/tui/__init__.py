"""The Textual app: it renders the loop's state and sends the user's intents; no logic of its own."""
