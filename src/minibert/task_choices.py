"""The choices of the one-call tasks (minibert.tasks) that the command line offers as flags.

They are written here, outside minibert.tasks (whose package imports the tasks, and so torch), so
that ``minibert classify --function`` and ``minibert tag --aggregation`` list them without torch.
"""

# classify(function_to_apply=...): how a classifier's logits become scores, as transformers' pipeline.
FUNCTIONS = ("softmax", "sigmoid", "none")
# tag(aggregation_strategy=...): how pieces become words and words entities, as transformers' pipeline.
AGGREGATIONS = ("none", "simple", "first", "average", "max")
