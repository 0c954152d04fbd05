"""Facts about the whole project: which modules it has, how they import one another, which
classes are models through bases in other modules, what is hot across modules, what runs on
CUDA. Every route (the CLI on a project or on one file, flake8, pre-commit, an editor) asks the
same project, so a file's findings do not depend on how it was linted."""
