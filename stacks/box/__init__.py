"""The cluster in a box: a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) with simulated nodes (kwok) made from a stack's plan, and the MPI Operator running out of cluster.

``python -m stacks.box build|up|down|bench`` (see :mod:`stacks.box.cli`); the binaries are built from the pinned Go
modules in the repository's ``box/`` folder (:mod:`stacks.box.build`). ``python -m stacks.rehearse``
(:mod:`stacks.box.rehearse_cli`) runs a stack on a box: its objects applied and its jobs run
(:mod:`stacks.box.rehearse`), and what happened printed (:mod:`stacks.box.timeline`). :mod:`stacks.box.session` holds
the steps of one run (build, up, nodes, provisioner, run, stop, down) the rehearsal, the benchmark and the cluster tier
share.
"""
