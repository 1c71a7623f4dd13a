package org.tserve;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.net.SocketException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.Test;
import org.tserve.config.ConfigException;

public class SocketDirTest {
    @Test
    public void aShortTmpdirIsUsed() throws Exception {
        assertEquals(Path.of("/var/tmp/x/tserve-42"), SocketDir.choose("/var/tmp/x", 42));
    }

    @Test
    public void aLongTmpdirFallsBackToTmp() throws Exception {
        // issue 27: with a TMPDIR this long every worker failed with "AF_UNIX path too long"
        String tmpdir = "/tmp/" + "d".repeat(90);
        Path dir = SocketDir.choose(tmpdir, 4194304);
        assertEquals(Path.of("/tmp/tserve-4194304"), dir);
        assertTrue(SocketDir.fits(dir));
        assertTrue(!SocketDir.fits(Path.of(tmpdir, "tserve-4194304")));
    }

    @Test
    public void theLimitIsExact() {
        String atLimit = "/" + "a".repeat(SocketDir.MAX_PATH_BYTES - SocketDir.LONGEST_NAME.length() - 2);
        assertTrue(SocketDir.fits(Path.of(atLimit)));
        assertTrue(!SocketDir.fits(Path.of(atLimit + "a")));
        assertTrue(!SocketDir.fits(Path.of("/é".repeat(50))));   // bytes count, not characters
    }

    @Test
    public void whenNothingFitsTheStartFailsNamingTheLimit() {
        try {
            Path p = SocketDir.choose("/" + "t".repeat(200), "/" + "f".repeat(100), 1);
            fail("chose " + p);
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("AF_UNIX's limit of 106"));
            assertTrue(e.getMessage(), e.getMessage().contains("set TMPDIR to a shorter folder"));
        }
    }

    @Test
    public void theLimitIsTheRunningJdks() throws Exception {
        // a worker socket the JDK cannot connect to made every worker wait out its 60 s and fail
        Path dir = Files.createTempDirectory(Path.of("/tmp"), "sockdir");
        try {
            int room = SocketDir.MAX_PATH_BYTES - dir.toString().length() - 1;
            Path atLimit = dir.resolve("s".repeat(room));
            try (ServerSocketChannel ch = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                ch.bind(UnixDomainSocketAddress.of(atLimit));
            }
            Path over = dir.resolve("s".repeat(room + 1));
            try (ServerSocketChannel ch = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                ch.bind(UnixDomainSocketAddress.of(over));
                fail("the JDK bound a " + (SocketDir.MAX_PATH_BYTES + 1) + "-byte path: raise MAX_PATH_BYTES");
            } catch (SocketException e) {
                assertTrue(e.getMessage(), e.getMessage().contains("too long"));
            }
        } finally {
            try (var files = Files.list(dir)) {
                for (Path p : (Iterable<Path>) files::iterator) {
                    Files.delete(p);
                }
            } catch (IOException ignored) {
                // best effort
            }
            Files.deleteIfExists(dir);
        }
    }
}
