"""GPT-1's supervised fine-tuning behind ``corpusforge finetune`` (``train``): task input transformations
(``tasks``) and the labelled task files (``task_files``) (docs/finetune.md)."""
