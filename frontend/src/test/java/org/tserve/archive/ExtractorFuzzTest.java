package org.tserve.archive;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import java.util.zip.GZIPOutputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.fuzz.FuzzLoop;
import org.tserve.fuzz.Mutator;

/**
 * Seeded mutation fuzzing of the archive extractor: valid .mar (zip) files mutated as bytes, and
 * tar streams mutated before they are gzipped (so the tar headers, not gzip's checksum, meet the
 * mutations: sizes, names, types, long-name and PAX records). Promises: an ArchiveException or an
 * IOException is the only error (both answer 400 at registration), no input hangs or allocates
 * beyond a bound, and nothing is written outside the destination folder. 3000 inputs of each
 * kind here, {@code -Dtserve.fuzz.iterations=N} for a longer run (docs/reliability.md).
 */
public class ExtractorFuzzTest {
    /** What unpacking may produce: small, so that a mutated size never fills the disk. */
    private static final ExtractionLimits LIMITS = new ExtractionLimits(1 << 20, 200, 0);

    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static byte[] zipSeed(String[][] entries) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ZipOutputStream z = new ZipOutputStream(bytes)) {
            for (String[] e : entries) {
                z.putNextEntry(new ZipEntry(e[0]));
                if (e[1] != null) {
                    z.write(e[1].getBytes(StandardCharsets.UTF_8));
                }
                z.closeEntry();
            }
        }
        return bytes.toByteArray();
    }

    private static byte[] tarSeed(boolean longName, boolean pax) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ArchiveTest.tarEntry(out, "m/MAR-INF/MANIFEST.json", "{\"model\": {\"modelName\": \"x\"}}".getBytes(StandardCharsets.UTF_8));
        if (longName) {
            byte[] name = ("m/" + "d".repeat(150) + "/weights.bin\0").getBytes(StandardCharsets.UTF_8);
            ArchiveTest.tarHeader(out, "././@LongLink", String.format("%011o", name.length) + "\0", 'L');
            out.write(name);
            out.write(new byte[(512 - name.length % 512) % 512]);
            ArchiveTest.tarEntry(out, "m/short", new byte[700]);
        }
        if (pax) {
            byte[] rec = "30 path=m/pax/named/file.txt\n".getBytes(StandardCharsets.UTF_8);
            ArchiveTest.tarHeader(out, "m/PaxHeaders/x", String.format("%011o", rec.length) + "\0", 'x');
            out.write(rec);
            out.write(new byte[(512 - rec.length % 512) % 512]);
            ArchiveTest.tarEntry(out, "m/ignored", "pax".getBytes(StandardCharsets.UTF_8));
        }
        ArchiveTest.tarHeader(out, "m/dir/", "00000000000\0", '5');
        ArchiveTest.tarEntry(out, "m/dir/handler.py", "def handle(d, c):\n    return d\n".getBytes(StandardCharsets.UTF_8));
        out.write(new byte[1024]);
        return out.toByteArray();
    }

    private static byte[] gzip(byte[] tar) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
            gz.write(tar);
        }
        return bytes.toByteArray();
    }

    private interface Extraction {
        void extract(Path archive, Path dest) throws IOException, ArchiveException;
    }

    /** Extracts {@code input} in a folder of its own; only its destination may gain files. */
    private void extractAlone(byte[] input, String name, Extraction how) throws Exception {
        Path root = tmp.newFolder().toPath();
        Path archive = root.resolve(name);
        Files.write(archive, input);
        Path dest = Files.createDirectory(root.resolve("out"));
        try {
            how.extract(archive, dest);
        } catch (ArchiveException | IOException expected) {
            // refused: registration answers 400 with the message
        }
        Set<String> left = new TreeSet<>();
        try (Stream<Path> s = Files.list(root)) {
            s.forEach(p -> left.add(p.getFileName().toString()));
        }
        assertEquals("written outside the destination", new TreeSet<>(List.of(name, "out")), left);
        try (Stream<Path> s = Files.walk(dest)) {
            for (Path p : (Iterable<Path>) s::iterator) {
                assertTrue(p + " escapes " + dest, p.toRealPath().startsWith(dest.toRealPath()));
            }
        }
        try (Stream<Path> s = Files.walk(root)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    private static long bound(byte[] input) {
        return 16L * input.length + (8L << 20);
    }

    @Test
    public void mutatedZipsOnlyEverAreRefused() throws Exception {
        List<byte[]> seeds = new ArrayList<>();
        seeds.add(zipSeed(new String[][] {{"MAR-INF/MANIFEST.json", "{\"model\": {}}"}, {"handler.py", "x = 1\n"}}));
        seeds.add(zipSeed(new String[][] {{"sub/", null}, {"sub/a.txt", "a".repeat(3000)}, {"b.bin", "\u0000\u0001"}}));
        Mutator m = new Mutator(FuzzLoop.seed(), seeds);
        FuzzLoop.run("zip extractor", FuzzLoop.iterations(3000), m::next, ExtractorFuzzTest::bound, 10,
                input -> extractAlone(input, "m.mar", (a, d) -> Extractor.unzip(a, d, LIMITS)));
    }

    @Test
    public void mutatedTarHeadersOnlyEverAreRefused() throws Exception {
        List<byte[]> seeds = List.of(tarSeed(false, false), tarSeed(true, false), tarSeed(false, true));
        Mutator m = new Mutator(FuzzLoop.seed(), seeds);
        FuzzLoop.run("tar extractor", FuzzLoop.iterations(3000), () -> {
            try {
                return gzip(m.next());
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }, ExtractorFuzzTest::bound, 10, input -> extractAlone(input, "m.tar.gz", (a, d) -> Extractor.untarGz(a, d, LIMITS)));
    }

    /** Found by the zip fuzz (seed 16, iteration 3): the JDK's IllegalArgumentException escaped as a 500-class error. */
    @Test
    public void aZipEntryNameThatIsNotUtf8IsA400() throws Exception {
        byte[] zip = zipSeed(new String[][] {{"MAR-INF/MANIFEST.json", "{}"}});
        zip[30 + 3] = (byte) 0xff;   // a byte of the first local header's name: not UTF-8
        Path archive = tmp.newFolder().toPath().resolve("bad.mar");
        Files.write(archive, zip);
        try {
            Extractor.unzip(archive, tmp.newFolder().toPath(), LIMITS);
            org.junit.Assert.fail("expected ArchiveException");
        } catch (ArchiveException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("not valid UTF-8"));
        }
    }
}
