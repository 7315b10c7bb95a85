"""The storage components' defaults that a stack's config keys share (``storage.*``, ``storage.fsx.*``): one home,
which the components and the config models both read. No cloud SDK here, so the config can import it."""

from typing import Final

#: EFS: the shared claim's requested size (EFS is elastic: Kubernetes needs a number; ``storage.capacity``).
DEFAULT_EFS_CAPACITY: Final = "1Ti"
#: EFS: throughput billed by use (``storage.throughputMode``).
DEFAULT_EFS_THROUGHPUT_MODE: Final = "elastic"
#: EFS: the performance mode (``storage.performanceMode``).
DEFAULT_EFS_PERFORMANCE_MODE: Final = "generalPurpose"
#: EFS: the StorageClass of the shared claim (``storage.storageClassName``).
DEFAULT_STORAGE_CLASS_NAME: Final = "efs-shared"
#: FSx for Lustre: the file system's size in GiB, the smallest PERSISTENT_2 takes (``storage.fsx.storageCapacityGib``).
DEFAULT_FSX_STORAGE_CAPACITY_GIB: Final = 1200
#: FSx for Lustre: MB/s per TiB of storage (``storage.fsx.throughputPerTib``).
DEFAULT_FSX_THROUGHPUT_PER_TIB: Final = 250
#: FSx for Lustre: metadata performance scaled with the storage by FSx (``storage.fsx.metadataMode``).
DEFAULT_FSX_METADATA_MODE: Final = "AUTOMATIC"
#: FSx for Lustre: where the data repository's objects appear (``storage.fsx.dataRepository.fileSystemPath``).
DEFAULT_FSX_DATA_PATH: Final = "/datasets"
#: FSx for Lustre: the prefix of the stack's own bucket that is imported (``storage.fsx.dataRepository.prefix``).
DEFAULT_FSX_DATA_PREFIX: Final = "datasets/"
