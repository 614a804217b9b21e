package eventlake.fs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local filesystem ({@code file:}, with its checksum files) without a process per
 * file.
 *
 * <p>Without Hadoop's native library, which pyspark does not ship, {@code RawLocalFileSystem}
 * forks {@code chmod} for every file it creates (twice with the checksum file) and
 * {@code readlink} twice for every rename through {@code FileContext} (each Delta commit):
 * about 28 processes a second for the orders pipeline, 4-5 ms each on an idle JVM, on the
 * thread of the batch that writes. {@link Raw} sets the same permission bits through
 * {@code java.nio} and looks a path's link status up in process; what it cannot do that way
 * (a sticky bit, a symbolic link) it leaves to Hadoop. {@link Fs} is the same for
 * {@code FileContext} (without checksum files, as Hadoop's {@code RawLocalFs}).
 */
public class InProcessLocalFileSystem extends LocalFileSystem {

    public InProcessLocalFileSystem() {
        super(new Raw());
    }

    /** {@code RawLocalFileSystem} setting permissions and reading link status in process. */
    public static class Raw extends RawLocalFileSystem {

        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
            PosixFilePermission.OTHERS_EXECUTE,
        };

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            int mode = permission.toShort();
            if ((mode & ~0777) != 0) {
                super.setPermission(p, permission);
                return;
            }
            Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
            for (int i = 0; i < BITS.length; i++) {
                if ((mode & (0400 >> i)) != 0) {
                    bits.add(BITS[i]);
                }
            }
            try {
                Files.setPosixFilePermissions(pathToFile(p).toPath(), bits);
            } catch (UnsupportedOperationException e) {
                super.setPermission(p, permission);
            }
        }

        /** A path that is no symbolic link has its file status as link status (Hadoop's
         * answer too, after a {@code readlink} process). */
        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            if (Files.isSymbolicLink(pathToFile(f).toPath())) {
                return super.getFileLinkStatus(f);
            }
            return getFileStatus(f);
        }
    }

    /** {@code FileContext}'s {@code file:} filesystem over {@link Raw}: Hadoop's
     * {@code RawLocalFs}, whose constructors are not public. */
    public static class Fs extends DelegateToFileSystem {

        public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new Raw(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;
        }
    }
}
