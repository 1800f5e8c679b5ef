package dev.comet.interop;

import java.lang.reflect.Field;
import java.net.InetSocketAddress;

import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.ha.DefaultHAService;

/**
 * The stock HA service of the Apache broker listens on the wildcard address (there is no setting for
 * its bind address), but on this machine every server must listen on loopback only. The broker loads
 * its HA service through {@code META-INF/service/org.apache.rocketmq.store.ha.HAService}, so this
 * subclass is picked up from the classpath; after the normal set-up it points the accept socket at
 * {@code -Dcomet.ha.bindAddress} (default 127.0.0.1) on the usual HA port (listenPort + 1).
 * Replication itself is untouched; the interop setup runs a single master anyway.
 */
public class LoopbackHaService extends DefaultHAService {
    private static final String BIND_PROPERTY = "comet.ha.bindAddress";
    private static final String DEFAULT_BIND = "127.0.0.1";

    @Override
    public void init(DefaultMessageStore store) throws java.io.IOException {
        super.init(store);
        String host = System.getProperty(BIND_PROPERTY, DEFAULT_BIND);
        int port = store.getMessageStoreConfig().getHaListenPort();
        try {
            Field accept = DefaultHAService.class.getDeclaredField("acceptSocketService");
            accept.setAccessible(true);
            Object service = accept.get(this);
            Field listen = DefaultHAService.AcceptSocketService.class.getDeclaredField("socketAddressListen");
            listen.setAccessible(true);
            listen.set(service, new InetSocketAddress(host, port));
        } catch (ReflectiveOperationException e) {
            throw new java.io.IOException("cannot rebind the HA listener to " + host + ":" + port, e);
        }
    }
}
