'use strict';
// Start a stand-in (node ARGS...) for a bench and resolve {child, port} once it says it is ready.
const { spawn } = require('child_process');

function startStandin(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const timer = setTimeout(() => { child.kill('SIGTERM'); reject(new Error('stand-in not ready in 10 s')); }, 10000);
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/standin ready port=(\d+)/);
      if (m) { clearTimeout(timer); resolve({ child, port: Number(m[1]) }); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`stand-in exited ${code}`)); });
  });
}

module.exports = { startStandin };
