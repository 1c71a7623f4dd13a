package org.tserve.grpc;

import io.netty.handler.ssl.JdkApplicationProtocolNegotiator;
import io.netty.handler.ssl.JdkSslServerContext;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SupportedCipherSuiteFilter;
import java.io.File;
import java.lang.reflect.Constructor;
import java.util.List;
import java.util.Set;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;

/**
 * gRPC needs TLS with ALPN ("h2"). Debian's Netty 4.1.48 has no OpenSSL binding and dropped
 * {@code JdkAlpnApplicationProtocolNegotiator}, so {@code GrpcSslContexts} fails with "JDK
 * provider does not support ALPN protocol". Java 9+ SSLEngines do ALPN themselves; this server
 * context plugs that in through Netty's own {@code Java9SslEngine} (still shipped, package-private,
 * reached by reflection), which also tells gRPC the negotiated protocol.
 */
@SuppressWarnings("deprecation")   // JdkSslServerContext is the only public way to pass a JDK negotiator
final class JdkAlpn {
    private static final List<String> H2 = List.of("h2");

    private JdkAlpn() {
    }

    static SslContext serverContext(File certChain, File key) throws SSLException {
        return new JdkSslServerContext(certChain, key, null, null, SupportedCipherSuiteFilter.INSTANCE, new Negotiator(),
            0, 0);
    }

    private static final class Negotiator implements JdkApplicationProtocolNegotiator {
        private final Constructor<?> java9Engine;

        Negotiator() throws SSLException {
            try {
                Class<?> c = Class.forName("io.netty.handler.ssl.Java9SslEngine");
                java9Engine = c.getDeclaredConstructor(SSLEngine.class, JdkApplicationProtocolNegotiator.class, boolean.class);
                java9Engine.setAccessible(true);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new SSLException("TLS for gRPC needs ALPN, which this Netty build cannot provide: " + e);
            }
        }

        @Override
        public List<String> protocols() {
            return H2;
        }

        @Override
        public SslEngineWrapperFactory wrapperFactory() {
            return (engine, negotiator, isServer) -> {
                try {
                    return (SSLEngine) java9Engine.newInstance(engine, negotiator, isServer);
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException("cannot enable ALPN on the TLS engine: " + e, e);
                }
            };
        }

        @Override
        public ProtocolSelectorFactory protocolSelectorFactory() {
            return (SSLEngine engine, Set<String> supported) -> new ProtocolSelector() {
                @Override
                public void unsupported() {
                }

                @Override
                public String select(List<String> offered) throws Exception {
                    for (String p : offered) {
                        if (supported.contains(p)) {
                            return p;
                        }
                    }
                    throw new SSLHandshakeException("client offered no supported application protocol (need h2): " + offered);
                }
            };
        }

        @Override
        public ProtocolSelectionListenerFactory protocolListenerFactory() {
            return (SSLEngine engine, List<String> protocols) -> new ProtocolSelectionListener() {
                @Override
                public void unsupported() {
                }

                @Override
                public void selected(String protocol) {
                }
            };
        }
    }
}
