"""Base handlers for models too large for one device: pipeline parallel (torch pipelining),
tensor parallel (DTensor), DeepSpeed inference and Hugging Face Accelerate."""
