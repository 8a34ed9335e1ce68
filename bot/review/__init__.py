"""Review in the chat: due items in the prompt, /review's exercises, the /progress chart."""
