"""The `model-rewrite` pseudo-pass: replays a function body a model wrote (see
superopt.model.rewrite). It never fires in the rule search (it needs the text as its
parameter); registering it lets cached and locked model wins be re-applied without a model."""
from superopt.model.rewrite import model_rewrite  # noqa: F401  (registers the pass)
