package org.tserve;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.tserve.config.ConfigException;

/**
 * The folder of the workers' Unix sockets ({@code .ts.sock.<port>}, the zygote's {@code
 * zygote.sock}): {@code <java.io.tmpdir>/tserve-<pid>} when the longest socket path in it fits
 * AF_UNIX's {@code sun_path}, else {@code /tmp/tserve-<pid>}; when neither fits the server does not
 * start (one line naming the limit and the fix) rather than start workers that cannot listen.
 */
final class SocketDir {
    /**
     * Linux's {@code sun_path} is 108 bytes with the terminating NUL, but the JDK's Unix socket
     * channel refuses a 107-byte path ("Unix domain path too long"): 106 is what both take.
     */
    static final int MAX_PATH_BYTES = 106;
    /** The longest name a socket in the folder gets (a worker on the highest port). */
    static final String LONGEST_NAME = ".ts.sock.65535";
    /** The short fallback when TMPDIR is long (Linux has it, writable for everyone). */
    static final String FALLBACK = "/tmp";

    private SocketDir() {
    }

    /** The first folder of {@code tmpdir}, {@link #FALLBACK} whose sockets fit. */
    static Path choose(String tmpdir, long pid) throws ConfigException {
        return choose(tmpdir, FALLBACK, pid);
    }

    static Path choose(String tmpdir, String fallback, long pid) throws ConfigException {
        List<Path> candidates = new ArrayList<>();
        candidates.add(Paths.get(tmpdir, "tserve-" + pid));
        candidates.add(Paths.get(fallback, "tserve-" + pid));
        for (Path dir : candidates) {
            if (fits(dir)) {
                return dir;
            }
        }
        Path longest = candidates.get(0).resolve(LONGEST_NAME);
        throw new ConfigException("the workers' Unix socket path " + longest + " is " + bytes(longest)
                + " bytes, above AF_UNIX's limit of " + MAX_PATH_BYTES + ", and " + fallback
                + " does not fit either: set TMPDIR to a shorter folder");
    }

    static boolean fits(Path dir) {
        return bytes(dir.resolve(LONGEST_NAME)) <= MAX_PATH_BYTES;
    }

    private static int bytes(Path p) {
        return p.toString().getBytes(StandardCharsets.UTF_8).length;
    }
}
