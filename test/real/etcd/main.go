// etcd for the real-peers suite: go.etcd.io/etcd/server/v3's embed package
// in a tiny main, so the suite needs no etcd release tarball.
//
//	etcd -data-dir DIR -listen-client URL -listen-peer URL
//
// Client and peer URLs are loopback; the process runs until SIGTERM.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory")
	client := flag.String("listen-client", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("listen-peer", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("etcd: -data-dir is required")
	}
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatalf("etcd: -listen-client: %v", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatalf("etcd: -listen-peer: %v", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.Name = "mlplat-test"
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	// A test cluster on a shared machine: no fsync on every write.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: %v", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd: ready on %s", cu)
	case <-time.After(120 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd: not ready after 120 s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	case <-sig:
	}
}
