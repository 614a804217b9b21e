"""The application file for spark-submit: ``spark-submit [options] <this file> [eventlake
arguments]`` runs the eventlake CLI as spark-submit's driver (``eventlake submit-file``
prints this path). It lives among data files so that, run as a script, its folder on
``sys.path`` shadows no module."""

from eventlake.cli.main import main

if __name__ == "__main__":
    main()
