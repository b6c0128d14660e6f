"""The columns of a run's learning curve, `plots/RUN.csv`: one list for both writers (a neural
run's `training.CurveWriter`, a count or closed-form run's one row in `lifecycle`). No torch."""

CURVE_FIELDS = ("epoch", "step", "train_loss", "val_loss", "val_ppl", "seconds")
