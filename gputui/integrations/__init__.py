"""Training-framework callbacks that report a job's steps with gputui.track.

`gputui.integrations.hf.GputuiCallback` (Hugging Face transformers) and
`gputui.integrations.lightning.GputuiCallback` (Lightning). Each framework is imported
only when its callback class is first asked for: importing gputui imports neither.
"""
