from ampbench.cli import main
from ampbench.launch.torchrun import is_rank

if is_rank():  # a rank torchrun started (`train --strategy`): it ends through leave() -- see its docstring
    from ampbench.launch.rank import leave

    try:
        main()
    except SystemExit as e:
        leave(e.code if isinstance(e.code, int) else int(e.code is not None))
    leave(0)
else:
    main()
