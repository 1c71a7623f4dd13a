package org.tserve.archive;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.GZIPOutputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class ArchiveTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static final String MANIFEST = "{\"runtime\": \"python\", \"model\": {\"modelName\": \"m\", \"handler\": \"h.py\", "
            + "\"modelVersion\": \"2.0\", \"configFile\": \"model-config.yaml\"}}";

    private Path zip(String name, String[][] entries) throws Exception {
        Path p = tmp.getRoot().toPath().resolve(name);
        try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(p))) {
            for (String[] e : entries) {
                z.putNextEntry(new ZipEntry(e[0]));
                z.write(e[1].getBytes(StandardCharsets.UTF_8));
                z.closeEntry();
            }
        }
        return p;
    }

    static void tarEntry(OutputStream out, String name, byte[] data) throws Exception {
        tarHeader(out, name, String.format("%011o", data.length) + "\0", '0');
        out.write(data);
        out.write(new byte[(512 - data.length % 512) % 512]);
    }

    /** A tar header with a raw 12-byte size field (declared size, not the data that follows). */
    static void tarHeader(OutputStream out, String name, String sizeField, char type) throws Exception {
        byte[] h = new byte[512];
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        System.arraycopy(n, 0, h, 0, n.length);
        System.arraycopy("0000644\0".getBytes(StandardCharsets.US_ASCII), 0, h, 100, 8);
        byte[] size = sizeField.getBytes(StandardCharsets.ISO_8859_1);
        System.arraycopy(size, 0, h, 124, size.length);
        h[156] = (byte) type;
        System.arraycopy("ustar\0".getBytes(StandardCharsets.US_ASCII), 0, h, 257, 6);
        for (int i = 148; i < 156; i++) {
            h[i] = ' ';
        }
        int sum = 0;
        for (byte b : h) {
            sum += b & 0xff;
        }
        System.arraycopy(String.format("%06o\0 ", sum).getBytes(StandardCharsets.US_ASCII), 0, h, 148, 8);
        out.write(h);
    }

    /** A .tar.gz of a header with the given size field and type, followed by {@code follow} bytes. */
    private Path hostileTar(String name, String sizeField, char type, int follow) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
            tarHeader(gz, "m/x", sizeField, type);
            gz.write(new byte[follow]);
        }
        Path tgz = tmp.getRoot().toPath().resolve(name);
        Files.write(tgz, bytes.toByteArray());
        return tgz;
    }

    /** Opens the archive, expecting a 400 whose message contains {@code expected}; no folder may stay. */
    private void assertRefused(Path archive, String expected) throws Exception {
        Path root = tmp.newFolder().toPath();
        try {
            ModelArchive.open(archive, root, archive.getFileName().toString(), null);
            fail("expected ArchiveException for " + archive.getFileName());
        } catch (ArchiveException e) {
            assertEquals(e.getMessage(), 400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains(expected));
        }
        try (java.util.stream.Stream<Path> s = Files.list(root.resolve("models"))) {
            assertEquals("temporary folders left behind", 0, s.count());
        }
    }

    @Test
    public void aJunkArchiveIsRefusedOrUnderTheSwitchReadAsEmptyWithADefaultManifest() throws Exception {
        Path junk = tmp.getRoot().toPath().resolve("densenet161.mar");
        Files.write(junk, "junk data".getBytes(StandardCharsets.UTF_8));
        assertTrue(ModelArchive.isUnreadable(junk));
        assertRefused(junk, "neither a .mar (zip) nor a .tar.gz");
        org.tserve.config.Compatibility.install(org.tserve.config.Compatibility.TORCHSERVE_0_12);
        try {
            // TorchServe 0.12's test_snapshot::test_replace_mar_file_with_dummy: the model is still listed
            ModelArchive a = ModelArchive.open(junk, tmp.newFolder().toPath(), "densenet161.mar", null);
            assertEquals(null, a.getManifest().modelName);
            assertTrue(a.getManifest().handler, a.getManifest().handler.contains("densenet161.mar"));
            a.delete();
        } finally {
            org.tserve.config.Compatibility.install(org.tserve.config.Compatibility.TSERVE);
        }
    }

    @Test
    public void hugeLongNameHeaderIsRefusedBeforeAnyAllocation() throws Exception {
        // 99-byte archives: a GNU long name ('L') or PAX ('x') header declaring a size far above the data
        assertRefused(hostileTar("l2g.tar.gz", "17777777777\0", 'L', 0), "long-name or PAX header of 2147483647 bytes");
        assertRefused(hostileTar("l200m.tar.gz", "01372741000\0", 'L', 0), "at most");
        assertRefused(hostileTar("l8g.tar.gz", "77777777777\0", 'L', 0), "at most");
        assertRefused(hostileTar("x2g.tar.gz", "17777777777\0", 'x', 0), "at most");
        // within the bound but not followed by the bytes it declares
        assertRefused(hostileTar("lshort.tar.gz", "00000400000\0", 'L', 512), "truncated");
    }

    @Test
    public void entrySizesAreCheckedAgainstTheBytesThatFollow() throws Exception {
        assertRefused(hostileTar("f8g.tar.gz", "77777777777\0", '0', 1024), "truncated");
        assertRefused(hostileTar("link8g.tar.gz", "77777777777\0", '2', 1024), "truncated");
        // GNU base-256 sizes: huge, and negative
        assertRefused(hostileTar("b256.tar.gz", "\u0080\0\0\0\0\u007f\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff", '0', 0),
                "truncated");
        assertRefused(hostileTar("neg.tar.gz", "\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff",
                '0', 0), "invalid size field");
        assertRefused(hostileTar("junk.tar.gz", "12345678x\0\0\0", '0', 0), "invalid size field");
    }

    private Path zipOf(String name, int entries, int bytesEach) throws Exception {
        Path p = tmp.getRoot().toPath().resolve(name);
        try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(p))) {
            byte[] zeros = new byte[bytesEach];
            for (int i = 0; i < entries; i++) {
                z.putNextEntry(new ZipEntry(i == 0 ? "MAR-INF/MANIFEST.json" : "f" + i));
                z.write(i == 0 ? MANIFEST.replace(", \"configFile\": \"model-config.yaml\"", "")
                        .getBytes(StandardCharsets.UTF_8) : zeros);
                z.closeEntry();
            }
        }
        return p;
    }

    @Test
    public void extractionLimitsNameTheirKey() throws Exception {
        Path dest = tmp.newFolder().toPath();
        Path many = zipOf("many.mar", 50, 1);
        try {
            Extractor.unzip(many, dest, new ExtractionLimits(0, 20, 0));
            fail();
        } catch (ArchiveException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("more than 20 entries (max_archive_entries)"));
        }
        Path big = zipOf("big.mar", 3, 1 << 20);
        try {
            Extractor.unzip(big, tmp.newFolder().toPath(), new ExtractionLimits(1 << 20, 0, 0));
            fail();
        } catch (ArchiveException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("max_archive_extracted_size"));
        }
        Path bomb = zipOf("bomb.mar", 2, 40 << 20);   // 40 MiB of zeros in ~40 KB
        try {
            Extractor.unzip(bomb, tmp.newFolder().toPath(), new ExtractionLimits(0, 0, 200));
            fail();
        } catch (ArchiveException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("max_archive_compression_ratio"));
        }
        // the same archives pass without limits, and small ones under the defaults
        Extractor.unzip(bomb, tmp.newFolder().toPath(), new ExtractionLimits(0, 0, 0));
        Extractor.unzip(many, tmp.newFolder().toPath(), ExtractionLimits.DEFAULT);
    }

    @Test
    public void tarLimitsCountSkippedDataToo() throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
            tarHeader(gz, "m/link", String.format("%011o", 40 << 20) + "\0", '2');   // skipped, not written
            gz.write(new byte[40 << 20]);
            gz.write(new byte[1024]);
        }
        Path tgz = tmp.getRoot().toPath().resolve("skip.tar.gz");
        Files.write(tgz, bytes.toByteArray());
        try {
            Extractor.untarGz(tgz, tmp.newFolder().toPath(), new ExtractionLimits(0, 0, 200));
            fail();
        } catch (ArchiveException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("max_archive_compression_ratio"));
        }
    }

    @Test
    public void marIsExtractedWithManifestAndYaml() throws Exception {
        Path mar = zip("m.mar", new String[][] {{"MAR-INF/MANIFEST.json", MANIFEST}, {"h.py", "x = 1\n"},
            {"model-config.yaml", "batchSize: 3\nhandler:\n  max_length: 7\n"}});
        ModelArchive a = ModelArchive.open(mar, tmp.getRoot().toPath(), "m.mar", null);
        assertEquals("m", a.getManifest().modelName);
        assertEquals("2.0", a.getManifest().modelVersion);
        assertEquals(3, a.getYamlConfig().get("batchSize"));
        assertTrue(Files.isRegularFile(a.getModelDir().resolve("h.py")));
        assertTrue(a.getTmpDir().startsWith(tmp.getRoot().toPath().resolve("models")));
        a.delete();
        assertFalse(Files.exists(a.getTmpDir()));
    }

    @Test
    public void zipSlipIsRefused() throws Exception {
        Path mar = zip("evil.mar", new String[][] {{"../../escape.txt", "x"}});
        try {
            ModelArchive.open(mar, tmp.getRoot().toPath(), "evil.mar", null);
            fail("expected ArchiveException");
        } catch (ArchiveException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("outside the archive"));
        }
        assertFalse(Files.exists(tmp.getRoot().toPath().getParent().resolve("escape.txt")));
    }

    @Test
    public void tarGzDropsTheFirstPathComponent() throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
            tarEntry(gz, "m/MAR-INF/MANIFEST.json", MANIFEST.replace(", \"configFile\": \"model-config.yaml\"", "")
                    .getBytes(StandardCharsets.UTF_8));
            tarEntry(gz, "m/h.py", "y = 2\n".getBytes(StandardCharsets.UTF_8));
            gz.write(new byte[1024]);
        }
        Path tgz = tmp.getRoot().toPath().resolve("m.tar.gz");
        Files.write(tgz, bytes.toByteArray());
        ModelArchive a = ModelArchive.open(tgz, tmp.getRoot().toPath(), "m.tar.gz", null);
        assertEquals("m", a.getManifest().modelName);
        assertEquals("y = 2\n", new String(Files.readAllBytes(a.getModelDir().resolve("h.py")), StandardCharsets.UTF_8));
    }

    @Test
    public void missingConfigFileIsNamed() throws Exception {
        Path mar = zip("m2.mar", new String[][] {{"MAR-INF/MANIFEST.json", MANIFEST}});
        try {
            ModelArchive.open(mar, tmp.getRoot().toPath(), "m2.mar", null);
            fail("expected ArchiveException");
        } catch (ArchiveException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("model-config.yaml"));
        }
    }

    @Test
    public void locatorRefusesRelativePathsAndDisallowedUrls() throws Exception {
        ModelLocator l = new ModelLocator(tmp.getRoot().getPath(), List.of("https://models\\.example/.*"), 1000);
        try {
            l.locate("../x.mar");
            fail();
        } catch (ArchiveException e) {
            assertEquals(404, e.getStatus());
        }
        try {
            l.locate("http://elsewhere/x.mar");
            fail();
        } catch (ArchiveException e) {
            assertEquals(404, e.getStatus());
            assertTrue(e.getMessage().contains("allowed"));
        }
        try {
            l.locate("nothere.mar");
            fail();
        } catch (ArchiveException e) {
            assertEquals(404, e.getStatus());
        }
        Files.createFile(tmp.getRoot().toPath().resolve("here.mar"));
        assertEquals(tmp.getRoot().toPath().resolve("here.mar"), l.locate("here.mar").path);
    }
}
