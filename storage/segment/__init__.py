"""The file backend: segment files with sparse offset and time indexes, Kafka's layout.

Modules, bottom up: ``files`` (names, atomic small files, refcounted fds), ``index`` (the
``.index`` / ``.timeindex`` formats), ``scan`` (walking and validating batches in a ``.log``),
``segment`` (one segment's files and lifecycle), ``load`` (opening a partition directory: the
recovery rules), ``commit`` (group commit of fsyncs), ``log`` (``FileLog``, the
``PartitionLog``), ``store`` (``FileStore``: topics, directories, clean shutdown). Each opens
with the theory of operation of what it owns.
"""
