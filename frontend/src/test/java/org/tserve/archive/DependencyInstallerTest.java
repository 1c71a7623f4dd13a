package org.tserve.archive;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

/** The per-model pip run, with a fake interpreter (a shell script) in place of python: no index, no pip. */
public class DependencyInstallerTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private ModelArchive archive() throws Exception {
        Path dir = tmp.newFolder("model").toPath();
        Files.createDirectories(dir.resolve("MAR-INF"));
        Files.write(dir.resolve("MAR-INF/MANIFEST.json"), ("{\"runtime\": \"python\", \"model\": {\"modelName\": \"m\", "
                + "\"handler\": \"h.py\", \"requirementsFile\": \"requirements.txt\"}}").getBytes(StandardCharsets.UTF_8));
        Files.write(dir.resolve("requirements.txt"), "something\n".getBytes(StandardCharsets.UTF_8));
        return ModelArchive.open(dir, tmp.newFolder("tmp").toPath(), "model", null);
    }

    /** A fake python whose "pip" runs {@code body} (sh), its arguments in "$@". */
    private String fakePython(String body) throws Exception {
        Path p = tmp.getRoot().toPath().resolve("python-" + System.nanoTime());
        Files.write(p, ("#!/bin/sh\n" + body + "\n").getBytes(StandardCharsets.UTF_8));
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwx------"));
        return p.toString();
    }

    @Test
    public void onlyWheelsUnlessTheOperatorAllowsSourceBuilds() throws Exception {
        Path deps = tmp.getRoot().toPath().resolve("deps");
        Path req = tmp.getRoot().toPath().resolve("r.txt");
        List<String> strict = DependencyInstaller.command("py", deps, req, new DependencyInstaller.Options(600, false));
        int i = strict.indexOf("--only-binary");
        assertTrue(strict.toString(), i > 0 && strict.get(i + 1).equals(":all:"));
        List<String> open = DependencyInstaller.command("py", deps, req, new DependencyInstaller.Options(600, true));
        assertFalse(open.toString(), open.contains("--only-binary"));
        assertTrue(strict.toString(), strict.contains("-t"));
        // into a model's venv (useVenv): the venv's python installs into its own environment
        List<String> venv = DependencyInstaller.command("py", null, req, new DependencyInstaller.Options(600, false));
        assertFalse(venv.toString(), venv.contains("-t"));
        assertTrue(venv.toString(), venv.contains("--only-binary"));
    }

    @Test
    public void aHangingPipIsStoppedAfterTheTimeout() throws Exception {
        ModelArchive a = archive();
        Path pidFile = tmp.getRoot().toPath().resolve("pid");
        String python = fakePython("echo $$ > " + pidFile + "; sleep 60");
        long t0 = System.nanoTime();
        try {
            DependencyInstaller.install(python, "m", a, new DependencyInstaller.Options(1, false));
            fail("pip ran past install_py_dep_timeout");
        } catch (ArchiveException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("install_py_dep_timeout (1 s)"));
        }
        assertTrue("took " + (System.nanoTime() - t0) / 1e9 + " s", System.nanoTime() - t0 < 20e9);
        long pid = Long.parseLong(new String(Files.readAllBytes(pidFile), StandardCharsets.UTF_8).trim());
        Thread.sleep(200);
        assertFalse("pip still runs", ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false));
    }

    @Test
    public void hugeOutputIsBoundedInTheErrorMessage() throws Exception {
        ModelArchive a = archive();
        // 20 MB without a line break, then an error line; exit 1
        String python = fakePython("head -c 20000000 /dev/zero | tr '\\0' x; echo; echo 'ERROR: no matching distribution'; "
                + "exit 1");
        try {
            DependencyInstaller.install(python, "m", a, new DependencyInstaller.Options(60, false));
            fail("pip failed");
        } catch (ArchiveException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("ERROR: no matching distribution"));
            assertTrue(e.getMessage(), e.getMessage().contains("install_py_dep_allow_source_builds"));
            assertTrue("message of " + e.getMessage().length() + " chars", e.getMessage().length() < 10_000);
        }
    }
}
