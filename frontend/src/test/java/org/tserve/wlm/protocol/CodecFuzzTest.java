package org.tserve.wlm.protocol;

import static org.junit.Assert.assertTrue;

import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.Test;
import org.tserve.fuzz.FuzzLoop;
import org.tserve.fuzz.Mutator;

/**
 * Seeded mutation fuzzing of the frontend's codec over the shared protocol vectors
 * (test/protocol_vectors/*.bin): whole frames, bodies on their own and frame streams read off a
 * channel. Promises: ProtocolException (or EOFException between frames) is the only error, no
 * input hangs, and no buffer is sized from a length field beyond the bytes that follow it.
 * Inputs: 20000 here, {@code -Dtserve.fuzz.iterations=N} for a longer run (docs/reliability.md).
 */
public class CodecFuzzTest {
    /** What decoding an input may allocate besides its own copies: buffers, lists, strings. */
    private static final long SLACK = 4L * Codec.ALLOCATE_AHEAD;

    static List<byte[]> vectors() throws IOException {
        File dir = new File(System.getProperty("tserve.repo", "../"), "test/protocol_vectors");
        File[] bins = dir.listFiles((d, n) -> n.endsWith(".bin"));
        assertTrue("no vectors in " + dir, bins != null && bins.length >= 10);
        java.util.Arrays.sort(bins);
        List<byte[]> out = new ArrayList<>();
        for (File f : bins) {
            out.add(Files.readAllBytes(f.toPath()));
        }
        return out;
    }

    /** A channel over {@code data} that hands out at most {@code step} bytes per read. */
    static final class Chunked implements ReadableByteChannel {
        private final ByteBuffer data;
        private final int step;

        Chunked(byte[] data, int step) {
            this.data = ByteBuffer.wrap(data);
            this.step = step;
        }

        @Override
        public int read(ByteBuffer dst) {
            if (!data.hasRemaining()) {
                return -1;
            }
            int n = Math.min(Math.min(step, dst.remaining()), data.remaining());
            ByteBuffer slice = data.slice();
            slice.limit(n);
            dst.put(slice);
            data.position(data.position() + n);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }

    private static void decodeBody(Frame f) throws ProtocolException {
        if (f.type == FrameType.INFERENCE) {
            Codec.decodeBatch(f.body);
        } else if (f.type == FrameType.RESULT || f.type == FrameType.CHUNK) {
            Codec.decodeResponses(f.body);
        } else {
            f.text();
        }
    }

    /** One input through every decoder; ProtocolException is the documented error. */
    static void decodeEverything(byte[] input, int step) throws IOException {
        try {
            decodeBody(Codec.decodeFrame(input));
        } catch (ProtocolException expected) {
            // refused with a reason: fine
        }
        try {
            Codec.decodeBatch(input);
        } catch (ProtocolException expected) {
            // idem
        }
        try {
            Codec.decodeResponses(input);
        } catch (ProtocolException expected) {
            // idem
        }
        ReadableByteChannel ch = new Chunked(input, step);
        for (int i = 0; i <= input.length / 9; i++) {   // a frame takes 9 bytes at least
            try {
                decodeBody(Codec.read(ch, Integer.MAX_VALUE));   // the largest max_response_size there is
            } catch (ProtocolException | EOFException end) {
                return;
            }
        }
        throw new AssertionError("the reader returned more frames than the stream can hold");
    }

    @Test
    public void mutatedFramesOnlyEverGiveProtocolErrors() throws Exception {
        Mutator m = new Mutator(FuzzLoop.seed(), vectors());
        Random steps = new Random(FuzzLoop.seed());
        FuzzLoop.run("codec", FuzzLoop.iterations(20000), m::next, in -> 8L * in.length + SLACK, 10,
                in -> decodeEverything(in, 1 + steps.nextInt(64)));
    }

    @Test
    public void aDeclaredLengthIsNotAllocatedBeforeItsBytesArrive() throws Exception {
        // RESULT declaring 2 GiB - 1 with 100 bytes behind it (found by the fuzz test above)
        byte[] frame = new byte[9 + 100];
        ByteBuffer.wrap(frame).putInt(0x7fff_ffff).put((byte) FrameType.RESULT).putInt(1);
        FuzzLoop.run("declared length", 1, () -> frame, in -> SLACK, 10, in -> {
            try {
                Codec.read(new Chunked(in, 4096), Integer.MAX_VALUE);
                throw new AssertionError("a truncated frame was accepted");
            } catch (ProtocolException expected) {
                assertTrue(expected.getMessage(), expected.getMessage().contains("inside a frame"));
            }
        });
    }
}
