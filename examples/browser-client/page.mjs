// The page's start: the options are the <html> element's data attributes, so each page
// differs from index.html by one flag: data-get="eventsource" (GET streams over the native
// EventSource), data-network-events="ignored" (the offline/online listeners not wired).
import { installStreamcheck } from './streamcheck.mjs';

const { get = 'fetch', networkEvents = 'heard', name } = document.documentElement.dataset;
installStreamcheck({ get, networkEvents: networkEvents !== 'ignored', name });
