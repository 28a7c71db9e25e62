package io.sbdelta.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A Delta LogStore for local file systems whose put-if-absent is atomic across processes.
 *
 * <p>Delta's LocalLogStore checks "version N is free" and renames onto it under a lock that
 * exists only inside one JVM; rename(2) replaces an existing file, so two processes can both
 * commit version N and one commit is silently lost. Here a commit is written to a private
 * temporary file, forced to disk, and published with link(2), which fails with EEXIST when the
 * target exists, in every process at once. The loser gets FileAlreadyExistsException, which
 * Delta's optimistic transaction treats as a concurrent commit: it re-checks for conflicts and
 * retries on the next version, exactly as on ADLS or GCS.
 */
public class LinkLocalLogStore extends HadoopFileSystemLogStore {

  public LinkLocalLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
      throws IOException {
    java.nio.file.Path target = java.nio.file.Paths.get(path.toUri().getPath());
    java.nio.file.Path dir = target.getParent();
    Files.createDirectories(dir);
    java.nio.file.Path tmp =
        dir.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    try {
      try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW,
          StandardOpenOption.WRITE)) {
        OutputStream out = Channels.newOutputStream(ch);
        while (actions.hasNext()) {
          out.write(actions.next().getBytes(StandardCharsets.UTF_8));
          out.write('\n');
        }
        out.flush();
        ch.force(true);
      }
      if (overwrite) {
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE,
            StandardCopyOption.REPLACE_EXISTING);
      } else {
        try {
          Files.createLink(target, tmp);
        } catch (FileAlreadyExistsException e) {
          throw new FileAlreadyExistsException(path.toString());
        }
      }
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  /**
   * True: a reader in another process (Spark or delta-rs) can see a file that is still being
   * written. Delta asks this before writing a checkpoint: with true it writes the checkpoint to a
   * temporary file and renames it into place, so no reader ever opens a half-written parquet
   * footer. (Log entries are published by link(2) above either way.)
   */
  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration conf) {
    return true;
  }
}
