package io.gpusched.client;

import java.io.IOException;

/** Where an answer's bytes come from: the service's connection, or (for tests and fuzzing) a byte array. */
interface ByteSource {
    /**
     * @return bytes read into {@code b}, at least one, or -1 at the end of the stream
     * @throws NodeServiceException when the source's time limit passes first
     * @throws IOException          when the connection fails
     */
    int read(byte[] b, int off, int len) throws IOException;
}
