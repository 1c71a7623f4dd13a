package org.tserve.wlm.supervision;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * Linux process lookups for torchrun jobs: a process's environment, every process carrying a
 * worker's tag (the ranks torch.distributed.elastic started, also after a restart or once the
 * agent is gone and they were re-parented), and DeepSpeed's shared-memory buffer files.
 */
public final class ProcessTree {
    private static final Logger LOG = Logging.logger(ProcessTree.class);
    static final Path SHM = Path.of("/dev/shm");
    private static final String SHM_PREFIX = "deepspeed_allreduce_buffer_";

    private ProcessTree() {
    }

    /** The environment of a process of ours, or an empty map when it cannot be read. */
    public static Map<String, String> environ(long pid) {
        Map<String, String> env = new HashMap<>();
        byte[] raw;
        try {
            raw = Files.readAllBytes(Path.of("/proc", String.valueOf(pid), "environ"));
        } catch (IOException | SecurityException e) {
            return env;
        }
        for (String kv : new String(raw, StandardCharsets.UTF_8).split("\0")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                env.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return env;
    }

    /** Live processes whose environment has {@code var=tag}. */
    static List<ProcessHandle> tagged(String var, String tag) {
        byte[] needle = ("\0" + var + "=" + tag + "\0").getBytes(StandardCharsets.UTF_8);
        List<ProcessHandle> out = new ArrayList<>();
        long self = ProcessHandle.current().pid();
        ProcessHandle.allProcesses().forEach(h -> {
            if (h.pid() == self || !h.isAlive()) {
                return;
            }
            try {
                byte[] raw = Files.readAllBytes(Path.of("/proc", String.valueOf(h.pid()), "environ"));
                byte[] padded = new byte[raw.length + 1];
                padded[0] = 0;
                System.arraycopy(raw, 0, padded, 1, raw.length);
                if (indexOf(padded, needle) >= 0) {
                    out.add(h);
                }
            } catch (IOException | SecurityException e) {
                // gone, or not ours
            }
        });
        return out;
    }

    /** Live processes in process group {@code pgid} (field 5 of /proc/PID/stat), this JVM excepted. */
    static List<ProcessHandle> group(long pgid) {
        List<ProcessHandle> out = new ArrayList<>();
        if (pgid <= 1) {
            return out;
        }
        long self = ProcessHandle.current().pid();
        ProcessHandle.allProcesses().forEach(h -> {
            if (h.pid() != self && running(h) && pgidOf(h.pid()) == pgid) {
                out.add(h);
            }
        });
        return out;
    }

    /** The process group of {@code pid}, or -1 when it cannot be read. */
    static long pgidOf(long pid) {
        String[] f = stat(pid);
        try {
            return f == null ? -1 : Long.parseLong(f[2]);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** Alive and not a zombie (one that exited and waits for its parent to reap it is gone). */
    static boolean running(ProcessHandle h) {
        String[] f = stat(h.pid());
        return h.isAlive() && f != null && !f[0].equals("Z");
    }

    /** /proc/PID/stat's fields from the state on ("pid (comm) state ppid pgrp ..."), or null. */
    private static String[] stat(long pid) {
        try {
            String stat = new String(Files.readAllBytes(Path.of("/proc", String.valueOf(pid), "stat")),
                    StandardCharsets.UTF_8);
            // comm may hold spaces and parentheses: count from the last ')'
            return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /**
     * Ends every process {@code members} names: SIGTERM, up to {@code graceMillis} to exit, then
     * SIGKILL until none is left (bounded). {@code members} is asked again each round, so a
     * process forked meanwhile is found too. Returns how many were sent SIGKILL.
     */
    static int end(java.util.function.Supplier<Collection<ProcessHandle>> members, long graceMillis, String what) {
        long graceEnd = System.currentTimeMillis() + graceMillis;
        java.util.Set<Long> termed = new java.util.HashSet<>();
        while (System.currentTimeMillis() < graceEnd) {
            Collection<ProcessHandle> left = members.get();
            if (left.isEmpty()) {
                return 0;
            }
            for (ProcessHandle h : left) {
                if (termed.add(h.pid())) {
                    h.destroy();
                }
            }
            if (!sleep(50)) {
                return 0;
            }
        }
        long killEnd = System.currentTimeMillis() + 5000;
        int killed = 0;
        while (true) {
            Collection<ProcessHandle> left = members.get();
            if (left.isEmpty()) {
                return killed;
            }
            for (ProcessHandle h : left) {
                if (h.destroyForcibly()) {
                    killed++;
                }
            }
            if (System.currentTimeMillis() > killEnd) {
                LOG.warn(what + ": processes still alive after SIGKILL: " + left);
                return killed;
            }
            if (!sleep(20)) {
                return killed;
            }
        }
    }

    private static boolean sleep(long millis) {
        try {
            Thread.sleep(millis);
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * DeepSpeed's name for a rank's shm buffer, up to the rank: {@code
     * deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_} (see
     * ts/handler_utils/distributed/deepspeed_shm.py).
     */
    static String deepspeedShmPrefix(String masterAddr, String masterPort) {
        return SHM_PREFIX + uid() + "_" + masterAddr + "_" + masterPort + "_";
    }

    /** Deletes the files in /dev/shm starting with one of {@code prefixes}; returns how many. */
    static int removeShmFiles(Collection<String> prefixes) {
        return removeShmFiles(SHM, prefixes);
    }

    static int removeShmFiles(Path dir, Collection<String> prefixes) {
        if (prefixes.isEmpty() || !Files.isDirectory(dir)) {
            return 0;
        }
        int n = 0;
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, SHM_PREFIX + "*")) {
            for (Path f : files) {
                String name = f.getFileName().toString();
                for (String p : prefixes) {
                    if (name.startsWith(p) && Files.deleteIfExists(f)) {
                        n++;
                        break;
                    }
                }
            }
        } catch (IOException e) {
            LOG.warn("cannot clean " + dir + ": " + e.getMessage());
        }
        return n;
    }

    private static String uid() {
        try {
            return String.valueOf(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return "0";
        }
    }

    private static int indexOf(byte[] hay, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= hay.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (hay[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }
}
